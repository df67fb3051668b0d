// codecell against the bare QuickJS floor, measured in one run: `pnpm --filter @codecell/bench bench:gateway`
// (or `pnpm bench` at the root). Subjects:
//   floor       bare quickjs-wasi in this thread, a fresh VM per run, host promises as guest promises
//   floor-json  the same, with tool inputs, results and the cell's value crossing as JSON text
//   engine      @codecell/engine embedded in this process: one engine, one prepared run, warm pool
//   gateway     `codecell serve` over MCP stdio (SDK client), the tools in a plugin (bench-plugin.mjs)
// The machine is shared, so subjects are interleaved round by round and the table shows medians and
// ratios to the floor of the same run. Cold starts and peak RSS run in fresh processes
// (performance-child.mjs), and so does the one-shot row: `codecell exec` of `return 1` from process
// start, against a bare `node -e` that imports quickjs-wasi and runs the same cell (floor.mjs).
// Writes bench-results/performance.json. Run after a build.
import { createHook } from "node:async_hooks";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createCodeModeEngine } from "@codecell/engine";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CELLS, prepareBenchRun } from "./bench-tools.mjs";
import { bareExecProgram, floorRun, loadFloor } from "./floor.mjs";
import { removeAtExit } from "./http-gateway.mjs";
import {
  busiestOtherThread,
  cellsPerSecond,
  median,
  runPerformanceChild,
  sharesMainCpu,
  threadCpuNanos,
  threadHopMicros,
} from "./measure.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const appDir = join(here, "..", "..", "apps", "gateway");
const benchDir = join(here, "..");
// BENCH_CLI runs the CLI rows (one-shot, `serve`) against another build's dist/cli.js, to compare builds.
const cli = process.env.BENCH_CLI ?? join(appDir, "dist", "cli.js");
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const STARTS = Number(process.env.BENCH_STARTS ?? 5);
const C5_CELLS = Number(process.env.BENCH_C5_CELLS ?? 80);

// --- subjects -------------------------------------------------------------------------------------
const floor = await loadFloor();
const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
const prepared = prepareBenchRun(engine, () => {
  placementProbe.calls += 1;
  if (placementProbe.calls === PROBE_AT_CALL) placementProbe.shared = sharesMainCpu(placementProbe.worker);
});
let callId = 0;
// Where the kernel runs the engine's two threads during its C2 cells: at the PROBE_AT_CALL-th nested call
// of each, whether the main thread and the sandbox worker last ran on the same CPU (two reads of /proc, a
// fraction of one call's time). On one CPU a warm engine's call costs about 2.5 times as much (see
// bench:placement), so the C2 samples are split by it.
const PROBE_AT_CALL = 50;
const placementProbe = { worker: null, calls: 0, shared: null };

const dir = mkdtempSync(join(tmpdir(), "codecell-perf-"));
removeAtExit(dir);
const configPath = join(dir, "codecell.json5");
writeFileSync(
  configPath,
  JSON.stringify({
    tools: { codeMode: { enabled: true, timeoutMs: 60_000 } },
    plugins: [{ module: join(here, "bench-plugin.mjs") }],
  }),
);
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [cli, "serve", "--config", configPath],
  stderr: "ignore",
});
const client = new Client({ name: "perf-bench", version: "1" });
await client.connect(transport);

const subjects = {
  floor: (code) => floorRun(floor, code, false),
  "floor-json": (code) => floorRun(floor, code, true),
  engine: async (code) => {
    const result = await prepared.exec({ code }, { toolCallId: `b${++callId}` });
    if (result.status !== "completed") throw new Error(`engine: ${JSON.stringify(result).slice(0, 300)}`);
    return result.value;
  },
  gateway: async (code) => {
    const result = await client.callTool({ name: "exec", arguments: { code } });
    const content = result.structuredContent;
    if (content?.status !== "completed") throw new Error(`gateway: ${JSON.stringify(content).slice(0, 300)}`);
    return content.value;
  },
};
const names = Object.keys(subjects);

// --- warm cells, interleaved ----------------------------------------------------------------------
/** samples[cell][subject] = ms per run */
const samples = Object.fromEntries(
  Object.keys(CELLS).map((cell) => [cell, Object.fromEntries(names.map((n) => [n, []]))]),
);
const throughput = Object.fromEntries(names.map((n) => [n, []]));

/** CPU time of all threads of this process, plus the gateway child's (10 ms ticks, so summed). */
const cpuTotals = Object.fromEntries(
  Object.keys(CELLS).map((cell) => [
    cell,
    Object.fromEntries(names.map((n) => [n, { micros: 0, count: 0 }])),
  ]),
);
const TICK_MICROS = 10_000;
function gatewayCpuMicros() {
  const pid = transport.pid;
  if (!pid) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * TICK_MICROS;
}
function cpuNow() {
  const usage = process.cpuUsage();
  return usage.user + usage.system + gatewayCpuMicros();
}

/** perCall[subject] = { main, busiestOther, allOther, calls } in ns, over the C2k runs. */
const perCall = Object.fromEntries(
  ["floor", "floor-json", "engine"].map((n) => [n, { main: 0, busiestOther: 0, allOther: 0, calls: 0 }]),
);
function addThreadCpu(subject, before, after, calls) {
  const mainTid = String(process.pid);
  const totals = perCall[subject];
  let busiest = 0;
  for (const [tid, nanos] of after) {
    const used = nanos - (before.get(tid) ?? 0);
    if (tid === mainTid) totals.main += used;
    else {
      totals.allOther += used;
      busiest = Math.max(busiest, used);
    }
  }
  totals.busiestOther += busiest;
  totals.calls += calls;
}

/** placedSamples[row] = { oneCpu: ms[], twoCpus: ms[] }: the engine's C2 cells by placement. */
const placedSamples = { C2: { oneCpu: [], twoCpus: [] }, "C2 steady": { oneCpu: [], twoCpus: [] } };

async function timeCell(subject, cell, key, placedRow) {
  const threadsStarted = key === "C2k" && subject in perCall ? threadCpuNanos() : null;
  placementProbe.calls = 0;
  placementProbe.shared = null;
  const cpuStarted = cpuNow();
  const started = performance.now();
  const value = await subjects[subject](cell.code);
  const elapsed = performance.now() - started;
  if (placedRow !== undefined && subject === "engine" && placementProbe.shared !== null)
    placedSamples[placedRow][placementProbe.shared ? "oneCpu" : "twoCpus"].push(elapsed);
  if (key !== undefined) {
    cpuTotals[key][subject].micros += cpuNow() - cpuStarted;
    cpuTotals[key][subject].count += 1;
  }
  if (threadsStarted !== null) addThreadCpu(subject, threadsStarted, threadCpuNanos(), cell.expect);
  if (value !== cell.expect)
    throw new Error(`${subject} returned ${JSON.stringify(value)} for ${cell.label}`);
  return elapsed;
}

/** C5 for one subject: cells per second. */
const cellsPerSecondOf = (subject) => cellsPerSecond(subjects[subject], C5_CELLS, subject);

// Warm-up: every subject runs every cell shape once.
for (const subject of names) {
  for (const cell of Object.values(CELLS)) await timeCell(subject, cell);
  await cellsPerSecondOf(subject);
}
placementProbe.worker = busiestOtherThread();
for (let round = 0; round < ROUNDS; round++) {
  // Rotate the order each round, so no subject always runs right after another's garbage.
  const order = names.map((_, index) => names[(index + round) % names.length]);
  for (const [key, cell] of Object.entries(CELLS)) {
    for (const subject of order) {
      for (let repeat = 0; repeat < cell.repeat; repeat++)
        samples[key][subject].push(await timeCell(subject, cell, key, key === "C2" ? "C2" : undefined));
    }
  }
  for (const subject of order) throughput[subject].push(await cellsPerSecondOf(subject));
}
// The same loop cells once V8 has finished optimising. The rounds above begin about 1,300 nested calls into
// a fresh engine, and the engine's nested-call path (JavaScript on two threads) keeps V8's optimising
// compiler busy for several thousand calls more, on the same 2 cores as both spinning threads; the floor's
// path is far shorter and warms within its first cell. So these rows run STEADY_WARMUP more unmeasured
// cells of each loop per subject, then ROUNDS interleaved rounds. The rows above are unchanged, so the
// warm-up's cost stays in the table beside them.
const STEADY_WARMUP = Number(process.env.BENCH_STEADY_WARMUP ?? 8);
const STEADY_CELLS = ["C2", "C2k"];
const steadySamples = Object.fromEntries(
  STEADY_CELLS.map((key) => [key, Object.fromEntries(names.map((n) => [n, []]))]),
);
for (let index = 0; index < STEADY_WARMUP; index++)
  for (const subject of names) for (const key of STEADY_CELLS) await timeCell(subject, CELLS[key]);
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, index) => names[(index + round) % names.length]);
  for (const key of STEADY_CELLS)
    for (const subject of order)
      steadySamples[key][subject].push(
        await timeCell(subject, CELLS[key], undefined, key === "C2" ? "C2 steady" : undefined),
      );
}
// Counts that load cannot distort: promises the main thread creates per nested call (async_hooks, in a
// pass of its own since the hook slows everything down).
const promisesPerCall = {};
for (const subject of ["floor", "floor-json", "engine"]) {
  let promises = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "PROMISE") promises++;
    },
  }).enable();
  await timeCell(subject, CELLS.C2k);
  hook.disable();
  promisesPerCall[subject] = promises / CELLS.C2k.expect;
}
await client.close();
await engine.close();
// What a thread hop costs here, in this run: the goal for C2 (the floor plus one hop per call)
// assumed the 13-14 µs measured when it was set.
const hop = await threadHopMicros();

// --- fresh processes: cold import -> first result, peak RSS, one-shot exec, `codecell serve` start ----

/**
 * CPU time so far of a child's main thread and of all its threads, in ms (schedstat; load does not add to
 * it), and the main thread's minor page faults: memory it touched for the first time, which costs CPU on
 * a machine where mapping memory in is slow, and which load does not change either.
 */
function childCpuMs(pid) {
  const read = (tid) => Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
  let all = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      all += read(tid);
    } catch {
      // The thread ended meanwhile.
    }
  }
  // Field 10 of stat (minflt), counted after the command name, which is in parentheses.
  const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, "utf8");
  const mainFaults = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[7]);
  return { main: read(pid) / 1e6, all: all / 1e6, mainFaults };
}

/**
 * Process start -> tools/list answered -> first exec result, over raw JSON-RPC lines; then idle RSS.
 * Beside wall time, the CPU the child had used at each mark (its main thread, and all its threads).
 */
function serveStart(env = process.env) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [cli, "serve", "--config", configPath], {
      stdio: ["pipe", "pipe", "ignore"],
      env,
    });
    const marks = {};
    let buffer = "";
    const send = (message) => child.stdin.write(`${JSON.stringify(message)}\n`);
    child.on("error", reject);
    child.stdout.on("data", (chunk) => {
      buffer += chunk;
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf("\n");
        const message = JSON.parse(line);
        if (message.id === 1) {
          send({ jsonrpc: "2.0", method: "notifications/initialized" });
          send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
        } else if (message.id === 2) {
          marks.toolsListMs = performance.now() - started;
          const cpu = childCpuMs(child.pid);
          marks.toolsListMainCpuMs = cpu.main;
          marks.toolsListMainFaults = cpu.mainFaults;
          marks.toolsListAllCpuMs = cpu.all;
          if (!message.result.tools.some((tool) => tool.name === "exec")) reject(new Error("no exec tool"));
          send({
            jsonrpc: "2.0",
            id: 3,
            method: "tools/call",
            params: { name: "exec", arguments: { code: "return 1 + 1" } },
          });
        } else if (message.id === 3) {
          marks.firstExecMs = performance.now() - started;
          const cpu = childCpuMs(child.pid);
          marks.firstExecMainCpuMs = cpu.main;
          marks.firstExecMainFaults = cpu.mainFaults;
          marks.firstExecAllCpuMs = cpu.all;
          if (message.result?.structuredContent?.value !== 2) reject(new Error(`first exec: ${line}`));
          // Idle RSS: a second after the first result, with nothing running.
          setTimeout(() => {
            const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
            marks.idleRssMb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
            child.stdin.end();
            child.kill("SIGTERM");
          }, 1000);
        }
      }
    });
    child.on("exit", () => resolve(marks));
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "perf-bench", version: "1" },
      },
    });
  });
}

/**
 * One whole one-shot process, from its spawn to the cell's result on stdout and to its exit: `codecell
 * exec` of ONE_SHOT_CELL (the bench's config, so the catalog has the plugin's tools), or the bare
 * `node -e` program that imports quickjs-wasi and runs the same cell (floor.mjs).
 */
const ONE_SHOT_CELL = "return 1";
function oneShotStart(subject) {
  const args =
    subject === "exec"
      ? [cli, "exec", "--config", configPath, "--code", ONE_SHOT_CELL]
      : ["-e", bareExecProgram(ONE_SHOT_CELL)];
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "ignore"], cwd: dir });
    let out = "";
    let resultMs;
    child.on("error", reject);
    child.stdout.on("data", (chunk) => {
      out += chunk;
      // The result is one JSON document, written at once; its closing brace ends it.
      if (resultMs === undefined && out.trimEnd().endsWith("}")) resultMs = performance.now() - started;
    });
    child.on("exit", (code) => {
      const exitMs = performance.now() - started;
      let value;
      try {
        value = JSON.parse(out).value;
      } catch {
        // Reported below with the output.
      }
      if (code !== 0 || value !== 1) reject(new Error(`${subject} exited ${code}: ${out.slice(0, 300)}`));
      else resolve({ resultMs, exitMs });
    });
  });
}

const cold = { floor: [], engine: [] };
const oneShot = { bare: [], exec: [] };
const rss = { floor: [], engine: [] };
const serve = [];
const serveWithoutCerts = [];
const extraCaCerts = Boolean(process.env.NODE_EXTRA_CA_CERTS);
const { NODE_EXTRA_CA_CERTS: _extraCaCerts, ...envWithoutCerts } = process.env;
// One start first, not measured: the CLI's files are then in the file system's cache, as for an
// installed CLI after its first run.
await serveStart();
for (let index = 0; index < STARTS; index++) {
  const engines = ["floor", "engine"];
  for (const subject of index % 2 === 0 ? engines : engines.toReversed()) {
    cold[subject].push(await runPerformanceChild(["cold", subject]));
    rss[subject].push(await runPerformanceChild(["rss", subject]));
  }
  const oneShots = ["bare", "exec"];
  for (const subject of index % 2 === 0 ? oneShots : oneShots.toReversed())
    oneShot[subject].push(await oneShotStart(subject));
  serve.push(await serveStart());
  // The same start without the certificate variable, when this environment sets it (see the note printed
  // below): what a machine without it sees. The target is judged on the environment as it is.
  if (extraCaCerts) serveWithoutCerts.push(await serveStart(envWithoutCerts));
}

// --- table ----------------------------------------------------------------------------------------
const rows = [];
const fixed = (value, digits = 2) => (Number.isFinite(value) ? Number(value.toFixed(digits)) : null);
const ratio = (value, base) => fixed(value / base);
/** Each row of the table by what it measures, for the targets below. */
const rowOf = {};
function cellRow(key, label, sampled) {
  const m = Object.fromEntries(names.map((n) => [n, median(sampled[key][n])]));
  rowOf[key] = {
    cell: label,
    unit: "ms",
    ...m,
    engineRatio: ratio(m.engine, m.floor),
    gatewayRatio: ratio(m.gateway, m.floor),
    engineToJson: ratio(m.engine, m["floor-json"]),
  };
  rows.push(rowOf[key]);
}
for (const [key, cell] of Object.entries(CELLS)) cellRow(key, cell.label, samples);
for (const key of STEADY_CELLS)
  cellRow(`${key} steady`, `${CELLS[key].label}, once V8 has optimised`, {
    [`${key} steady`]: steadySamples[key],
  });
{
  const m = Object.fromEntries(names.map((n) => [n, median(throughput[n])]));
  rowOf.C5 = {
    cell: "C5 trivial cells/s, 4 concurrent",
    unit: "cells/s",
    ...m,
    engineRatio: ratio(m.engine, m.floor),
    gatewayRatio: ratio(m.gateway, m.floor),
    engineToJson: ratio(m.engine, m["floor-json"]),
  };
  rows.push(rowOf.C5);
}
{
  const floorTotal = median(cold.floor.map((c) => c.totalMs));
  const engineTotal = median(cold.engine.map((c) => c.totalMs));
  const serveExec = median(serve.map((s) => s.firstExecMs));
  rowOf.cold = {
    cell: "cold: import -> first result",
    unit: "ms",
    floor: floorTotal,
    "floor-json": null,
    engine: engineTotal,
    gateway: serveExec,
    engineRatio: ratio(engineTotal, floorTotal),
    gatewayRatio: ratio(serveExec, floorTotal),
    engineToJson: null,
  };
  rows.push(rowOf.cold);
  rowOf.startup = {
    cell: "  of which import (engine) / tools/list from process start (gateway)",
    unit: "ms",
    floor: median(cold.floor.map((c) => c.importMs)),
    "floor-json": null,
    engine: median(cold.engine.map((c) => c.importMs)),
    gateway: median(serve.map((s) => s.toolsListMs)),
    engineRatio: null,
    gatewayRatio: null,
    engineToJson: null,
  };
  rows.push(rowOf.startup);
  for (const [mark, label, execSubject, key] of [
    ["resultMs", "one-shot: process start -> result on stdout (`codecell exec` / bare `node -e`)", "exec"],
    ["exitMs", "one-shot: process start -> exit (`codecell exec` / bare `node -e`)", "exec"],
  ]) {
    const bare = median(oneShot.bare.map((s) => s[mark]));
    const exec = median(oneShot[execSubject].map((s) => s[mark]));
    rowOf[key ?? mark] = {
      cell: label,
      unit: "ms",
      floor: bare,
      "floor-json": null,
      engine: null,
      gateway: exec,
      engineRatio: null,
      gatewayRatio: ratio(exec, bare),
      engineToJson: null,
    };
    rows.push(rowOf[key ?? mark]);
  }
  const floorRss = median(rss.floor.map((r) => r.peakRssMb));
  const engineRss = median(rss.engine.map((r) => r.peakRssMb));
  rowOf.rss = {
    cell: "peak RSS, 100 sequential C1 (gateway: idle RSS)",
    unit: "MB",
    floor: floorRss,
    "floor-json": null,
    engine: engineRss,
    gateway: median(serve.map((s) => s.idleRssMb)),
    engineRatio: ratio(engineRss, floorRss),
    gatewayRatio: null,
    engineToJson: null,
  };
  rows.push(rowOf.rss);
}
for (const row of rows)
  for (const name of names) if (typeof row[name] === "number") row[name] = fixed(row[name]);
const cpuRows = Object.entries(CELLS).map(([key, cell]) => {
  const m = Object.fromEntries(
    names.map((n) => [n, fixed(cpuTotals[key][n].micros / cpuTotals[key][n].count / 1000, 3)]),
  );
  return {
    cell: cell.label,
    ...m,
    engineRatio: ratio(m.engine, m.floor),
    gatewayRatio: ratio(m.gateway, m.floor),
  };
});

// Where a nested call's CPU goes: the main thread (engine, bridge host side, executor) and the sandbox
// worker (QuickJS, the guest prelude, the worker's bridge side), against the floor's single thread.
const perCallRows = Object.entries(perCall).map(([subject, t]) => ({
  subject,
  "main thread µs/call": fixed(t.main / t.calls / 1000, 1),
  "busiest other thread (sandbox worker) µs/call": fixed(t.busiestOther / t.calls / 1000, 1),
  "all other threads µs/call": fixed(t.allOther / t.calls / 1000, 1),
  "total µs/call": fixed((t.main + t.allOther) / t.calls / 1000, 1),
  "main-thread promises/call": fixed(promisesPerCall[subject], 1),
}));

const targets = [
  ["C2 engine <= 2x floor (goal 1.5x)", rowOf.C2.engineRatio <= 2],
  ["C2 engine <= 2x floor, once V8 has optimised", rowOf["C2 steady"].engineRatio <= 2],
  ["1,000 sequential nested calls <= 50 ms (engine)", rowOf.C2k.engine <= 50],
  [
    "1,000 sequential nested calls <= 50 ms (engine), once V8 has optimised",
    rowOf["C2k steady"].engine <= 50,
  ],
  ["C1 engine <= 1.5x floor", rowOf.C1.engineRatio <= 1.5],
  ["C4 engine <= 1.3x floor-json", rowOf.C4.engineToJson <= 1.3],
  ["C5 engine >= 0.9x floor", rowOf.C5.engineRatio >= 0.9],
  ["cold import -> first result <= 1.6x floor (engine default: worker)", rowOf.cold.engineRatio <= 1.6],
  ["codecell exec from process start -> result <= 1.3x bare node -e", rowOf.resultMs.gatewayRatio <= 1.3],
  ["codecell exec from process start -> exit <= 1.3x bare node -e", rowOf.exitMs.gatewayRatio <= 1.3],
  ["serve: tools/list <= 250 ms from process start", rowOf.startup.gateway <= 250],
  ["serve: first exec <= 300 ms from process start", rowOf.cold.gateway <= 300],
  ["peak RSS, 100 C1 <= 1.0x floor (engine default: worker)", rowOf.rss.engineRatio <= 1],
].map(([target, met]) => ({ target, met }));

console.log(
  `\ncodecell against the QuickJS floor (medians of ${ROUNDS} interleaved rounds, ${STARTS} fresh processes; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")})`,
);
console.table(rows);
console.log(
  "CPU ms per cell, mean over all rounds (all threads; the gateway adds its process, 10 ms ticks): steadier than wall time on a busy machine",
);
console.table(cpuRows);
console.log(
  "CPU µs per nested call by thread, C2k (schedstat, ns resolution; other threads include GC helpers)",
);
console.table(perCallRows);
console.log(
  "`codecell serve` start-up, CPU ms used by the child at each mark (medians; schedstat): its main thread, and all its threads",
);
const serveRows = (starts, suffix) =>
  ["toolsList", "firstExec"].map((mark) => ({
    mark: `${mark === "toolsList" ? "tools/list answered" : "first exec result"}${suffix}`,
    "wall ms": fixed(median(starts.map((s) => s[`${mark}Ms`]))),
    "main thread CPU ms": fixed(median(starts.map((s) => s[`${mark}MainCpuMs`]))),
    "all threads CPU ms": fixed(median(starts.map((s) => s[`${mark}AllCpuMs`]))),
    "main thread page faults": median(starts.map((s) => s[`${mark}MainFaults`])),
  }));
console.table([
  ...serveRows(serve, ""),
  ...(extraCaCerts ? serveRows(serveWithoutCerts, " (without NODE_EXTRA_CA_CERTS)") : []),
]);
if (process.env.NODE_EXTRA_CA_CERTS) {
  console.log(
    "NODE_EXTRA_CA_CERTS is set: every fresh Node process (the cold and serve children, the floor's too) parses those certificates as it starts, before any of its own code (about 40 ms of main-thread CPU for 144 certificates on the 2-core test machine; see the gateway README's cold start)",
  );
}
console.table(targets);
{
  const calls = CELLS.C2.expect;
  const model = rowOf.C2.floor + (calls * hop.sleeping) / 1000;
  hop.goalModelMs = fixed(model);
  hop.goalModelRatio = ratio(model, rowOf.C2.floor);
  console.log(
    `One thread hop here (a round trip through shared memory, nothing else): ${fixed(hop.sleeping, 1)} µs with both threads asleep between messages, ${fixed(hop.spinning, 2)} µs with both spinning. The goal model for C2, the floor plus one hop per call: ${hop.goalModelMs} ms here (${hop.goalModelRatio}x the floor).`,
  );
}
// The engine's C2 cells split by where its two threads ran at their PROBE_AT_CALL-th call.
const placementRows = Object.entries(placedSamples).map(([row, { oneCpu, twoCpus }]) => ({
  row: row === "C2" ? CELLS.C2.label : `${CELLS.C2.label}, once V8 has optimised`,
  "cells on two CPUs": twoCpus.length,
  "median ms on two CPUs": fixed(median(twoCpus)),
  "cells on one CPU": oneCpu.length,
  "median ms on one CPU": fixed(median(oneCpu)),
  "floor ms": fixed(rowOf[row].floor),
}));
console.log(
  `The engine's C2 cells by where the kernel ran its main thread and sandbox worker at the ${PROBE_AT_CALL}th nested call (see bench:placement)`,
);
console.table(placementRows);
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "performance.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), rounds: ROUNDS, steadyWarmup: STEADY_WARMUP, rows, cpu: cpuRows, perCall: perCallRows, placement: { probeAtCall: PROBE_AT_CALL, rows: placementRows, samples: placedSamples }, targets, hop, samples, steadySamples, throughput, cold, rss, oneShot, serve, serveWithoutCerts }, null, 2)}\n`,
);
