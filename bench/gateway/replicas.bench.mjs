// The latency of a `wait` that resumes, on replica B, a run suspended on replica A (two built
// `codecell serve --http` processes on one real redis-server), next to a wait that resumes on the same
// replica, with a cell whose snapshot is about 150 KB; then a fault run: three replicas, one killed
// (SIGKILL of its process group) with runs and nested calls in flight, and Redis killed and restarted
// from its append-only file, counting runs accepted and completed, calls interrupted and delivered, runs
// resumed twice, and how long a dead replica takes to be seen. Prints tables and writes
// bench-results/replicas.json. Needs /usr/bin/redis-server (Debian's redis-server package).
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { hasRedis, startRedisServer } from "../../scripts/redis-server.mjs";

const appDir = fileURLToPath(new URL("../../apps/gateway/", import.meta.url));
const benchDir = fileURLToPath(new URL("..", import.meta.url));
const cli = join(appDir, "dist", "cli.js");
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 40);
const WARMUP = 5;
const TOKEN = "bench-token-0123456789abcdef";
const SECRET = "bench-integrity-secret-0123456789abcdef0123";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "bench" };
const SLOW_SERVER = join(appDir, "test", "fixtures", "slow-server.mjs");
/** The fault run's lease: what a dead replica's detection time is measured against. */
const FAULT_LEASE_MS = Number(process.env.BENCH_FAULT_LEASE_MS ?? 2000);
const FAULT_RUNS = Number(process.env.BENCH_FAULT_RUNS ?? 20);

// A fresh VM alone snapshots to about 141 KB; 6,000 characters of random base-36 text (built with one
// join, so no garbage strings stay behind) bring the record to about 150 KB.
const CELL_CHARS = Number(process.env.BENCH_CELL_CHARS ?? 6000);
const CELL = `
  const parts = [];
  for (let n = 0; n < ${CELL_CHARS}; n += 10) parts.push(Math.random().toString(36).slice(2, 12).padEnd(10, "0"));
  const blob = parts.join("");
  parts.length = 0;
  await yield_control("resume me anywhere");
  return blob.length;
`;

if (!hasRedis) {
  console.warn(
    "replicas bench skipped: /usr/bin/redis-server is not installed (Debian package redis-server)",
  );
  process.exit(0);
}

const redis = await startRedisServer();
const dir = mkdtempSync(join(tmpdir(), "codecell-replicas-bench-"));
cpSync(join(appDir, "demo-workspace"), join(dir, "workspace"), { recursive: true });
const configPath = join(dir, "codecell.json5");
writeFileSync(
  configPath,
  JSON.stringify({
    tools: { codeMode: { enabled: true, timeoutMs: 30000 } },
    workspace: "./workspace",
    http: { tokens: [{ name: "bench", token: TOKEN }] },
    snapshotStore: { kind: "redis", url: redis.url, secret: SECRET, maxLiveRuns: 1000 },
  }),
);

function startGateway(config = configPath) {
  // Its own process group, so a fault can kill it with its downstream servers, as a lost machine does.
  const child = spawn(process.execPath, [cli, "serve", "--config", config, "--http", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output}`)), 60_000);
    const onData = (chunk) => {
      output += chunk.toString("utf8");
      const match = /MCP endpoint\s+(http:\/\/\S+\/mcp)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, mcpUrl: match[1] });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
}

async function connect(mcpUrl) {
  const client = new Client({ name: "codecell-bench", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: HEADERS } });
  await client.connect(transport);
  return { client, close: () => transport.terminateSession().then(() => client.close()) };
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  return result.structuredContent;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Suspends a run on `on` (exec), then times the wait on `resumer` that completes it. */
async function measure(on, resumer) {
  const times = [];
  const bytes = [];
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    const waiting = await call(on.client, "exec", { code: CELL });
    if (waiting.status !== "waiting")
      throw new Error(`exec did not wait: ${JSON.stringify(waiting).slice(0, 300)}`);
    const stored = waiting.telemetry.snapshotEvents.find((event) => event.event === "stored");
    const started = performance.now();
    const done = await call(resumer.client, "wait", { runId: waiting.runId });
    const elapsed = performance.now() - started;
    if (done.status !== "completed")
      throw new Error(`wait did not complete: ${JSON.stringify(done).slice(0, 300)}`);
    if (i >= WARMUP) {
      times.push(elapsed);
      bytes.push(stored?.bytes ?? 0);
    }
  }
  times.sort((a, b) => a - b);
  bytes.sort((a, b) => a - b);
  return {
    p50Ms: Math.round(percentile(times, 50) * 100) / 100,
    p99Ms: Math.round(percentile(times, 99) * 100) / 100,
    recordBytesP50: percentile(bytes, 50),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the run is no longer waiting (bounded); answers the result and when it came. */
async function waitDone(on, runId, maxWaits = 200) {
  let result = await call(on.client, "wait", { runId });
  for (let attempt = 1; attempt < maxWaits && result.status === "waiting"; attempt += 1) {
    result = await call(on.client, "wait", { runId });
  }
  return { result, at: performance.now() };
}

/** Repeats a call while Redis is coming back (runtime_unavailable), bounded. */
async function onceRedisAnswers(action) {
  let result = await action();
  for (let attempt = 0; attempt < 80 && result.code === "runtime_unavailable"; attempt += 1) {
    await sleep(250);
    result = await action();
  }
  return result;
}

/** Waits one more time: a run that finished must say so, never resume again. */
async function resumedAgain(on, runId) {
  const again = await call(on.client, "wait", { runId });
  return !(again.status === "failed" && /already (completed|failed)/.test(again.error ?? ""));
}

const SLOW_CELL = (seconds) => `
  try { return (await MCP.slow.waitLong({ seconds: ${seconds} })).content[0].text; }
  catch (error) { return error.code === "nested_tool_failed" && /interrupted/.test(error.message) ? "interrupted" : String(error.message); }`;

/**
 * The fault run. Three replicas on a Redis with an append-only file. Replica A takes FAULT_RUNS runs
 * whose nested call would take a minute, B takes as many whose call takes 3 s, and A and B a few that
 * only yield; then A's process group is SIGKILLed and every run is waited for on C (A's) and B (B's).
 * Then Redis is SIGKILLed with runs waiting and a call running, and restarted from its file.
 */
async function faultRun() {
  const faultRedis = await startRedisServer({ persistence: "aof" });
  const faultConfig = join(dir, "faults.json5");
  writeFileSync(
    faultConfig,
    JSON.stringify({
      tools: { codeMode: { enabled: true, timeoutMs: 1000 } },
      workspace: "./workspace",
      http: { tokens: [{ name: "bench", token: TOKEN }] },
      mcpServers: {
        slow: { command: process.execPath, args: [SLOW_SERVER], env: { CALL_LOG: join(dir, "calls.log") } },
      },
      snapshotStore: {
        kind: "redis",
        url: faultRedis.url,
        secret: SECRET,
        keyPrefix: "faults:",
        replicaLeaseMs: FAULT_LEASE_MS,
      },
    }),
  );
  const replicas = [];
  const sessions = [];
  try {
    replicas.push(
      ...(await Promise.all([
        startGateway(faultConfig),
        startGateway(faultConfig),
        startGateway(faultConfig),
      ])),
    );
    const [a, b, c] = await Promise.all(replicas.map((replica) => connect(replica.mcpUrl)));
    sessions.push(a, b, c);
    for (const session of [a, b, c]) await call(session.client, "exec", { code: "return 1" });
    const counts = {
      accepted: 0,
      completed: 0,
      interrupted: 0,
      delivered: 0,
      yielded: 0,
      resumedTwice: 0,
      lost: 0,
    };
    const accept = async (on, code) => {
      const waiting = await call(on.client, "exec", { code });
      if (waiting.status !== "waiting")
        throw new Error(`exec did not wait: ${JSON.stringify(waiting).slice(0, 300)}`);
      counts.accepted += 1;
      return waiting.runId;
    };
    const onA = await Promise.all(Array.from({ length: FAULT_RUNS }, () => accept(a, SLOW_CELL(60))));
    const onB = await Promise.all(Array.from({ length: FAULT_RUNS }, () => accept(b, SLOW_CELL(3))));
    const yields = [];
    for (let index = 0; index < 10; index += 1)
      yields.push(await accept(index % 2 ? a : b, `await yield_control("y"); return ${index};`));
    const killedAt = performance.now();
    process.kill(-replicas[0].child.pid, "SIGKILL");
    const settle = async (on, runId) => {
      const { result, at } = await waitDone(on, runId);
      if (result.status !== "completed") {
        counts.lost += 1;
        return null;
      }
      counts.completed += 1;
      if (result.value === "interrupted") counts.interrupted += 1;
      else if (result.value === "finished") counts.delivered += 1;
      else if (typeof result.value === "number") counts.yielded += 1;
      if (await resumedAgain(on, runId)) counts.resumedTwice += 1;
      return at - killedAt;
    };
    const detect = (await Promise.all(onA.map((runId) => settle(c, runId)))).filter((ms) => ms !== null);
    await Promise.all([...onB.map((runId) => settle(b, runId)), ...yields.map((runId) => settle(c, runId))]);
    detect.sort((x, y) => x - y);
    const replicaFault = {
      leaseMs: FAULT_LEASE_MS,
      ...counts,
      detectMsMin: Math.round(detect[0] ?? Number.NaN),
      detectMsP50: Math.round(percentile(detect, 50) ?? Number.NaN),
      detectMsMax: Math.round(detect.at(-1) ?? Number.NaN),
    };

    // Redis killed with runs waiting and a call running on B, down for two leases, back from its file.
    const redisCounts = {
      accepted: 0,
      completed: 0,
      delivered: 0,
      interrupted: 0,
      resumedTwice: 0,
      lost: 0,
      unavailableWhileDown: 0,
    };
    const redisRuns = [];
    for (let index = 0; index < FAULT_RUNS; index += 1) {
      const waiting = await call(b.client, "exec", { code: `await yield_control("y"); return ${index};` });
      if (waiting.status === "waiting") {
        redisCounts.accepted += 1;
        redisRuns.push(waiting.runId);
      }
    }
    const running = await call(b.client, "exec", { code: SLOW_CELL(2) });
    redisCounts.accepted += 1;
    await faultRedis.halt();
    const down = await call(c.client, "wait", { runId: redisRuns[0] });
    if (down.code === "runtime_unavailable") redisCounts.unavailableWhileDown += 1;
    await sleep(2 * FAULT_LEASE_MS);
    const restartedAt = performance.now();
    await faultRedis.start();
    for (const runId of [...redisRuns, running.runId]) {
      const first = await onceRedisAnswers(() => call(c.client, "wait", { runId }));
      const { result } = first.status === "waiting" ? await waitDone(c, runId) : { result: first };
      if (result.status !== "completed") {
        redisCounts.lost += 1;
        continue;
      }
      redisCounts.completed += 1;
      if (result.value === "finished") redisCounts.delivered += 1;
      if (result.value === "interrupted") redisCounts.interrupted += 1;
      if (await resumedAgain(c, runId)) redisCounts.resumedTwice += 1;
    }
    const redisRestart = { ...redisCounts, allBackMs: Math.round(performance.now() - restartedAt) };
    return { replicaFault, redisRestart };
  } finally {
    for (const session of sessions) await session.close().catch(() => {});
    for (const replica of replicas) {
      try {
        process.kill(-replica.child.pid, "SIGKILL");
      } catch {}
    }
    await faultRedis.stop();
  }
}

const gateways = [];
const clients = [];
try {
  gateways.push(await startGateway(), await startGateway());
  const [a, b] = [await connect(gateways[0].mcpUrl), await connect(gateways[1].mcpUrl)];
  clients.push(a, b);
  const results = {
    node: process.version,
    iterations: ITERATIONS,
    "same replica (A to A)": await measure(a, a),
    "other replica (A to B)": await measure(a, b),
  };
  const rows = Object.entries(results)
    .filter(([, value]) => typeof value === "object")
    .map(([path, value]) => ({
      wait: path,
      "p50 ms": value.p50Ms,
      "p99 ms": value.p99Ms,
      "record bytes": value.recordBytesP50,
    }));
  console.table(rows);
  const faults = await faultRun();
  results.faults = faults;
  const fault = faults.replicaFault;
  console.table([
    {
      fault: `replica A SIGKILLed (lease ${fault.leaseMs} ms)`,
      accepted: fault.accepted,
      completed: fault.completed,
      "calls interrupted": fault.interrupted,
      "calls delivered": fault.delivered,
      "resumed twice": fault.resumedTwice,
      "dead replica seen after (min/p50/max ms)": `${fault.detectMsMin} / ${fault.detectMsP50} / ${fault.detectMsMax}`,
    },
    {
      fault: "Redis SIGKILLed, restarted from AOF",
      accepted: faults.redisRestart.accepted,
      completed: faults.redisRestart.completed,
      "calls interrupted": faults.redisRestart.interrupted,
      "calls delivered": faults.redisRestart.delivered,
      "resumed twice": faults.redisRestart.resumedTwice,
      "dead replica seen after (min/p50/max ms)": "-",
    },
  ]);
  const outDirectory = join(benchDir, "bench-results");
  mkdirSync(outDirectory, { recursive: true });
  writeFileSync(join(outDirectory, "replicas.json"), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  for (const client of clients) await client.close().catch(() => {});
  for (const gateway of gateways) gateway.child.kill("SIGKILL");
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
