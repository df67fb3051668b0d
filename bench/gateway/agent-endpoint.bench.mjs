// The agent endpoint's cost over a direct upstream call. One built `codecell serve --http` with an
// `agent` section, pointed at the scripted upstream (an OpenAI-compatible server on loopback that
// answers at once), and a plain fetch client for both paths, so the difference is what the endpoint
// adds: for a pass-through request, for a code-mode turn in which the model answers without a cell,
// and for a client tool round trip (the cell calls a client tool: suspend and hand out, the client's
// result, resume, the model's answer). Prints a table and writes bench-results/agent-endpoint.json.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedUpstream } from "@codecell/agent/testing";

const appDir = fileURLToPath(new URL("../../apps/gateway/", import.meta.url));
const benchDir = fileURLToPath(new URL("..", import.meta.url));
const cli = join(appDir, "dist", "cli.js");
const TURNS = Number(process.env.BENCH_ITERATIONS ?? 300);
const ROUND_TRIPS = Number(process.env.BENCH_ROUND_TRIPS ?? 60);
const WARMUP = 20;
const TOOLS = [
  {
    type: "function",
    function: {
      name: "select_file",
      description: "Ask the user to pick a file.",
      parameters: { type: "object", properties: { pattern: { type: "string" } } },
    },
  },
];

const upstream = await startScriptedUpstream();
const dir = mkdtempSync(join(tmpdir(), "codecell-agent-bench-"));
cpSync(join(appDir, "demo-workspace"), join(dir, "workspace"), { recursive: true });
const configPath = join(dir, "codecell.json5");
writeFileSync(
  configPath,
  JSON.stringify({
    tools: { codeMode: { enabled: true, timeoutMs: 10000 } },
    workspace: "./workspace",
    agent: { upstream: { baseUrl: upstream.baseUrl }, maxModelTurns: 8 },
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
      const match = /MCP endpoint\s+(http:\/\/\S+)\/mcp/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, base: match[1] });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${JSON.stringify(json)}`);
  return json;
}

function stats(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  return {
    p50Ms: Math.round(at(50) * 1000) / 1000,
    p99Ms: Math.round(at(99) * 1000) / 1000,
    n: sorted.length,
  };
}

/**
 * CPU milliseconds the gateway process (all its threads) has used: utime + stime of /proc/<pid>/stat, in
 * clock ticks of 10 ms. On a shared machine wall-clock latency is mostly waiting for a core; the CPU a
 * request costs the gateway is the figure that does not move with load.
 */
function gatewayCpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Times `count` single requests (after a warm-up), each answered by the upstream with text. */
async function timeTurns(url, count, body) {
  const times = [];
  for (let i = 0; i < WARMUP + count; i++) {
    upstream.script({ text: "ok" });
    const started = performance.now();
    await post(url, body(i));
    if (i >= WARMUP) times.push(performance.now() - started);
  }
  return stats(times);
}

/**
 * The floor of any proxy here: a bare Node HTTP server that forwards the body over a keep-alive
 * node:http client (the gateway's upstream transport) and returns the answer, in a process of its own
 * (like the gateway). What it adds over a direct call is the extra loopback hop, not code mode.
 */
function startBareProxy(target) {
  const source = `
    const { Agent, createServer, request } = require("node:http");
    const agent = new Agent({ keepAlive: true });
    const server = createServer(async (req, res) => {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const body = Buffer.concat(chunks);
      const upstream = request(${JSON.stringify(target)}, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": body.length } });
      upstream.on("response", async (answer) => {
        const parts = [];
        for await (const part of answer) parts.push(part);
        res.writeHead(answer.statusCode, { "content-type": "application/json" }).end(Buffer.concat(parts));
      });
      upstream.end(body);
    });
    server.listen(0, "127.0.0.1", () => console.log("proxy " + server.address().port));
  `;
  const child = spawn(process.execPath, ["-e", source], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve) => {
    child.stdout.once("data", (chunk) => {
      const port = /proxy (\d+)/.exec(chunk.toString())[1];
      resolve({ child, url: `http://127.0.0.1:${port}/` });
    });
  });
}

let gateway;
let proxy;
try {
  proxy = await startBareProxy(`${upstream.baseUrl}/chat/completions`);
  gateway = await startGateway();
  const endpoint = `${gateway.base}/v1/chat/completions`;
  const direct = `${upstream.baseUrl}/chat/completions`;
  const plain = (i) => ({ model: "m", messages: [{ role: "user", content: `question ${i}` }] });
  const withTools = (i) => ({ ...plain(i), tools: TOOLS });
  // The same turn through the Responses front (function tools are flat there; stored, as by default).
  const responsesEndpoint = `${gateway.base}/v1/responses`;
  const responsesTools = TOOLS.map((tool) => ({ type: "function", ...tool.function }));
  const responsesTurn = (i) => ({ model: "m", input: `question ${i}`, tools: responsesTools });

  // Interleaved in blocks, so a slow phase of the shared machine hits both paths alike.
  const directRuns = [];
  const proxyRuns = [];
  const passRuns = [];
  const turnRuns = [];
  const responsesRuns = [];
  const cpu = { bareProxy: 0, passThrough: 0, turn: 0, responsesTurn: 0, roundTrip: 0 };
  const pid = gateway.child.pid;
  for (let block = 0; block < 3; block++) {
    directRuns.push(await timeTurns(direct, TURNS / 3, withTools));
    let before = gatewayCpuMs(proxy.child.pid);
    proxyRuns.push(await timeTurns(proxy.url, TURNS / 3, withTools));
    cpu.bareProxy += gatewayCpuMs(proxy.child.pid) - before;
    before = gatewayCpuMs(pid);
    passRuns.push(await timeTurns(endpoint, TURNS / 3, plain));
    cpu.passThrough += gatewayCpuMs(pid) - before;
    before = gatewayCpuMs(pid);
    turnRuns.push(await timeTurns(endpoint, TURNS / 3, (i) => withTools(i + block * 100000)));
    cpu.turn += gatewayCpuMs(pid) - before;
    before = gatewayCpuMs(pid);
    responsesRuns.push(
      await timeTurns(responsesEndpoint, TURNS / 3, (i) => responsesTurn(i + block * 100000)),
    );
    cpu.responsesTurn += gatewayCpuMs(pid) - before;
  }
  const perRequest = (ms, count) => Math.round((ms / count) * 1000) / 1000;
  const warmedCount = 3 * (TURNS / 3 + WARMUP);
  const mid = (runs, key) => [...runs.map((run) => run[key])].sort((a, b) => a - b)[1];
  const directStats = { p50Ms: mid(directRuns, "p50Ms"), p99Ms: mid(directRuns, "p99Ms") };
  const proxyStats = { p50Ms: mid(proxyRuns, "p50Ms"), p99Ms: mid(proxyRuns, "p99Ms") };
  const passStats = { p50Ms: mid(passRuns, "p50Ms"), p99Ms: mid(passRuns, "p99Ms") };
  const turnStats = { p50Ms: mid(turnRuns, "p50Ms"), p99Ms: mid(turnRuns, "p99Ms") };
  const responsesStats = { p50Ms: mid(responsesRuns, "p50Ms"), p99Ms: mid(responsesRuns, "p99Ms") };

  // Client tool round trip: hand-out, then the client's result resumes the run and the model answers.
  const handOut = [];
  const resume = [];
  const total = [];
  const roundTripCpuBefore = gatewayCpuMs(pid);
  const cell = 'const f = await tools.select_file({ pattern: "*.md" }); return f.path;';
  for (let i = 0; i < 5 + ROUND_TRIPS; i++) {
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: cell } }] }, { text: "done" });
    const messages = [{ role: "user", content: `round trip ${i}` }];
    const started = performance.now();
    const first = await post(endpoint, { model: "m", messages, tools: TOOLS });
    const handedAt = performance.now();
    const message = first.choices[0].message;
    if (!message.tool_calls) throw new Error(`no tool calls: ${JSON.stringify(first)}`);
    messages.push(message, {
      role: "tool",
      tool_call_id: message.tool_calls[0].id,
      content: '{"path":"a.md"}',
    });
    const resumedAt = performance.now();
    const second = await post(endpoint, { model: "m", messages, tools: TOOLS });
    const ended = performance.now();
    if (second.choices[0].message.content !== "done")
      throw new Error(`unexpected: ${JSON.stringify(second)}`);
    if (i >= 5) {
      handOut.push(handedAt - started);
      resume.push(ended - resumedAt);
      total.push(ended - started);
    }
  }

  cpu.roundTrip = gatewayCpuMs(pid) - roundTripCpuBefore;
  const results = {
    node: process.version,
    loadAverage: (await import("node:os")).loadavg()[0],
    gatewayCpuMsPerRequest: {
      bareProxy: perRequest(cpu.bareProxy, warmedCount),
      passThrough: perRequest(cpu.passThrough, warmedCount),
      codeModeTurnWithoutCell: perRequest(cpu.turn, warmedCount),
      responsesTurnWithoutCell: perRequest(cpu.responsesTurn, warmedCount),
      clientToolRoundTrip: perRequest(cpu.roundTrip, 5 + ROUND_TRIPS),
    },
    turns: TURNS,
    roundTrips: ROUND_TRIPS,
    directUpstream: directStats,
    bareProxy: proxyStats,
    passThrough: passStats,
    codeModeTurnWithoutCell: turnStats,
    responsesTurnWithoutCell: responsesStats,
    addedPassThroughP50Ms: Math.round((passStats.p50Ms - directStats.p50Ms) * 1000) / 1000,
    addedTurnWithoutCellP50Ms: Math.round((turnStats.p50Ms - directStats.p50Ms) * 1000) / 1000,
    addedResponsesTurnP50Ms: Math.round((responsesStats.p50Ms - directStats.p50Ms) * 1000) / 1000,
    addedBareProxyP50Ms: Math.round((proxyStats.p50Ms - directStats.p50Ms) * 1000) / 1000,
    clientToolHandOut: stats(handOut),
    clientToolResume: stats(resume),
    clientToolRoundTrip: stats(total),
  };
  console.table([
    { path: "direct upstream call", "p50 ms": directStats.p50Ms, "p99 ms": directStats.p99Ms },
    {
      path: "bare Node proxy (http server + keep-alive http client)",
      "p50 ms": proxyStats.p50Ms,
      "p99 ms": proxyStats.p99Ms,
    },
    { path: "endpoint, pass-through", "p50 ms": passStats.p50Ms, "p99 ms": passStats.p99Ms },
    { path: "endpoint, code-mode turn without a cell", "p50 ms": turnStats.p50Ms, "p99 ms": turnStats.p99Ms },
    {
      path: "Responses front, code-mode turn without a cell",
      "p50 ms": responsesStats.p50Ms,
      "p99 ms": responsesStats.p99Ms,
    },
    {
      path: "client tool: exec to hand-out",
      "p50 ms": results.clientToolHandOut.p50Ms,
      "p99 ms": results.clientToolHandOut.p99Ms,
    },
    {
      path: "client tool: result to answer (resume)",
      "p50 ms": results.clientToolResume.p50Ms,
      "p99 ms": results.clientToolResume.p99Ms,
    },
    {
      path: "client tool: whole round trip",
      "p50 ms": results.clientToolRoundTrip.p50Ms,
      "p99 ms": results.clientToolRoundTrip.p99Ms,
    },
  ]);
  console.log(
    `CPU per request: bare proxy ${results.gatewayCpuMsPerRequest.bareProxy} ms; gateway pass-through ${results.gatewayCpuMsPerRequest.passThrough} ms, code-mode turn without a cell ${results.gatewayCpuMsPerRequest.codeModeTurnWithoutCell} ms (Responses front ${results.gatewayCpuMsPerRequest.responsesTurnWithoutCell} ms), client tool round trip (two requests) ${results.gatewayCpuMsPerRequest.clientToolRoundTrip} ms; load average ${results.loadAverage.toFixed(1)} on ${(await import("node:os")).cpus().length} cores`,
  );
  console.log(
    `added p50 over a direct call: bare proxy ${results.addedBareProxyP50Ms} ms, pass-through ${results.addedPassThroughP50Ms} ms, code-mode turn without a cell ${results.addedTurnWithoutCellP50Ms} ms, through the Responses front ${results.addedResponsesTurnP50Ms} ms (target < 3 ms)`,
  );
  const outDirectory = join(benchDir, "bench-results");
  mkdirSync(outDirectory, { recursive: true });
  writeFileSync(join(outDirectory, "agent-endpoint.json"), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  gateway?.child.kill("SIGTERM");
  proxy?.child.kill("SIGTERM");
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
}
