// The latency of a `wait` that resumes, on replica B, a run suspended on replica A (two built
// `codecell serve --http` processes on one real redis-server), next to a wait that resumes on the same
// replica, with a cell whose snapshot is about 150 KB. Prints a table and writes
// bench-results/replicas.json. Needs /usr/bin/redis-server (Debian's redis-server package).
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { hasRedis, startRedisServer } from "../../../scripts/redis-server.mjs";

const appDir = fileURLToPath(new URL("..", import.meta.url));
const cli = join(appDir, "dist", "cli.js");
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 40);
const WARMUP = 5;
const TOKEN = "bench-token-0123456789abcdef";
const SECRET = "bench-integrity-secret-0123456789abcdef0123";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "bench" };

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

function startGateway() {
  const child = spawn(process.execPath, [cli, "serve", "--config", configPath, "--http", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
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
  const outDirectory = join(appDir, "bench-results");
  mkdirSync(outDirectory, { recursive: true });
  writeFileSync(join(outDirectory, "replicas.json"), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  for (const client of clients) await client.close().catch(() => {});
  for (const gateway of gateways) gateway.child.kill("SIGTERM");
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
