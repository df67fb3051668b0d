// What OpenTelemetry tracing costs a cell: C1 (`return 1 + 1`) and a cell of 100 sequential nested
// calls, with tracing off (no tracer provider registered: the engine does not even load the API), on
// with a sampler that keeps nothing (the provider is there, every exec span is dropped at its start),
// and on with every span recorded and exported (the SDK's batch processor into an in-memory exporter:
// encoding and sending OTLP happen later, off the cell's path, in the batch). Each mode runs in a fresh
// process of its own, because registering a provider is for the whole process; the modes take turns
// over several rounds so that a busy machine weighs on all of them alike. "hooks removed" is the engine
// with its tracing module replaced by one that does nothing: a copy of dist/ made by this bench in
// bench-results/, with tracing.js written over (no production code path, no loader hook: a module
// hook would sit in every dynamic import() the engine makes and weigh on this mode alone). "off"
// against it is what the hooks cost when nobody traces.
// The off path of one exec (its span helper, which finds no provider and returns null) is also timed
// alone, in a loop of millions, since its cost is far below what a cell's timing can resolve; a nested
// call's off path is one null check of its parent's span and calls nothing of the tracing module.
// Prints a table and writes bench-results/tracing.json. Run after a build.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const MODES = ["hooks removed", "off", "sampler 0", "all exported"];
const ROUNDS = Number(process.env.TRACING_BENCH_ROUNDS ?? 3);
const C1_RUNS = 300;
const LOOP_RUNS = 60;
const GUARD_CALLS = 2_000_000;
/**
 * The engine's build with tracing.js replaced by helpers that do nothing and check nothing. It sits in the
 * engine's folder (under its ignored bench-results/) so that its imports resolve the engine's own
 * dependencies, as the real build's do.
 */
const NO_TRACING_DIST = join(here, "../../packages/engine/bench-results/no-tracing-engine/dist");
const NO_TRACING = `// Written by bench/engine/tracing.bench.mjs: the tracing module with nothing in it.
export function tracingRegistered() { return false; }
export class TracedSpan {}
export function startSpan() { return null; }
export function spanJson(value) { return JSON.stringify(value) ?? "null"; }
export function traceModelCall() { return null; }
export function activeTraceHeaders() { return {}; }
`;
const distOf = (mode) =>
  mode === "hooks removed" ? pathToFileURL(`${NO_TRACING_DIST}/`).href : "../../packages/engine/dist/";
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * Nanoseconds per call of the exec span's helper (`controlSpan`, as an exec calls it, attributes and
 * all) in this process's mode: with tracing off it finds no provider and returns null.
 */
async function guardNs(dist) {
  const { controlSpan } = await import(`${dist}control-record.js`);
  const engine = { tracing: {}, redactInput: (_tool, value) => value };
  const context = { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" };
  const call = { toolCallId: "t1" };
  const input = { code: "return 1 + 1" };
  let made = 0;
  const loop = (count) => {
    for (let i = 0; i < count; i++) if (controlSpan(engine, context, "exec", call, "run", input)) made++;
  };
  loop(GUARD_CALLS / 10);
  const started = process.hrtime.bigint();
  loop(GUARD_CALLS);
  const ns = Number(process.hrtime.bigint() - started) / GUARD_CALLS;
  if (made !== 0) throw new Error("a span was made with tracing off");
  return ns;
}

async function child(mode) {
  const dist = distOf(mode);
  let spans = () => 0;
  if (mode !== "off" && mode !== "hooks removed") {
    const { NodeTracerProvider } = await import("@opentelemetry/sdk-trace-node");
    const { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, InMemorySpanExporter } = await import(
      "@opentelemetry/sdk-trace-base"
    );
    const exporter = new InMemorySpanExporter();
    const provider = new NodeTracerProvider({
      sampler: mode === "sampler 0" ? new AlwaysOffSampler() : new AlwaysOnSampler(),
      spanProcessors: [
        new BatchSpanProcessor(exporter, { maxQueueSize: 100_000, scheduledDelayMillis: 200 }),
      ],
    });
    provider.register();
    spans = () => exporter.getFinishedSpans().length;
    // Exported spans are dropped as they come, so memory does not grow with the runs.
    setInterval(() => exporter.reset(), 1000).unref();
  }
  const { createCodeModeEngine } = await import(`${dist}index.js`);
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
  const run = engine.prepareRun({
    tools: [
      {
        name: "inc",
        description: "Return the value",
        parameters: { type: "object", properties: { value: { type: "number" } } },
        source: "core",
        owner: "host",
      },
    ],
    context: { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" },
    executor: { callTool: (call) => call.input?.value ?? 0 },
  });
  let callId = 0;
  const LOOP = "let s = 0; for (let i = 0; i < 100; i++) s += await tools.inc({ value: 1 }); return s;";
  // Wall time per cell, and CPU time per cell over all the runs (every thread of the process: the
  // sandbox worker's too). On a machine other work keeps busy, CPU time is the steadier of the two.
  const time = async (code, expected, runs) => {
    const samples = [];
    const cpuBefore = process.cpuUsage();
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      const result = await run.exec({ code }, { toolCallId: `t${++callId}` });
      samples.push((performance.now() - started) * 1000);
      if (result.value !== expected) throw new Error(JSON.stringify(result));
    }
    const cpu = process.cpuUsage(cpuBefore);
    return { wall: median(samples), cpu: (cpu.user + cpu.system) / runs };
  };
  // Warm the pool and the JIT on both shapes first.
  await time("return 1 + 1", 2, 50);
  await time(LOOP, 100, 10);
  const c1 = await time("return 1 + 1", 2, C1_RUNS);
  const loop = await time(LOOP, 100, LOOP_RUNS);
  const apiLoaded = Object.keys(
    await import("node:module").then((m) => m.createRequire(import.meta.url).cache),
  ).some((file) => file.includes("@opentelemetry/api"));
  const guard = mode === "off" || mode === "hooks removed" ? await guardNs(dist) : null;
  await engine.close();
  return {
    c1: c1.wall,
    c1Cpu: c1.cpu,
    loop: loop.wall,
    loopCpu: loop.cpu,
    spansSeen: spans(),
    apiLoaded,
    guardNs: guard,
  };
}

if (process.argv[2] === "--child") {
  const result = await child(process.argv[3]);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

// The copy sits under the package, so its imports of @codecell/* resolve as dist's do.
rmSync(NO_TRACING_DIST, { recursive: true, force: true });
cpSync(join(here, "../../packages/engine/dist"), NO_TRACING_DIST, {
  recursive: true,
  filter: (path) => !path.endsWith(".map"),
});
writeFileSync(join(NO_TRACING_DIST, "tracing.js"), NO_TRACING);

const perMode = Object.fromEntries(MODES.map((mode) => [mode, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const mode of MODES) {
    const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", mode], {
      encoding: "utf8",
      timeout: 300_000,
    });
    if (out.status !== 0) throw new Error(`${mode} child failed:\n${out.stderr}`);
    perMode[mode].push(JSON.parse(out.stdout.trim().split("\n").at(-1)));
  }
}
const of = (mode, key) => median(perMode[mode].map((result) => result[key]));
const BASE = "hooks removed";
const versus = (mode, key) => `${(((of(mode, key) - of(BASE, key)) / of(BASE, key)) * 100).toFixed(1)}%`;
const rows = MODES.map((mode) => ({
  mode,
  "C1 wall µs": Math.round(of(mode, "c1")),
  "C1 CPU µs": Math.round(of(mode, "c1Cpu")),
  "C1 CPU vs removed": versus(mode, "c1Cpu"),
  "100 calls wall µs": Math.round(of(mode, "loop")),
  "100 calls CPU µs": Math.round(of(mode, "loopCpu")),
  "100 calls CPU vs removed": versus(mode, "loopCpu"),
  "CPU per nested call µs": Number(((of(mode, "loopCpu") - of(BASE, "loopCpu")) / 100).toFixed(2)),
  "spans exported": perMode[mode].reduce((sum, result) => sum + result.spansSeen, 0) > 0,
  "API loaded": perMode[mode].some((result) => result.apiLoaded),
}));
console.log(
  `Tracing cost per cell: medians over ${ROUNDS} fresh processes per mode (${C1_RUNS} C1 runs, ${LOOP_RUNS} runs of 100 calls each); load average ${loadavg()[0].toFixed(1)}`,
);
console.table(rows);
// The exec helper's off path against the same helper with the hooks removed, both timed alone.
const guard = {
  offNs: of("off", "guardNs"),
  removedNs: of(BASE, "guardNs"),
};
guard.perCellNs = guard.offNs - guard.removedNs;
guard.shareOfC1 = `${((guard.perCellNs / 1000 / of(BASE, "c1Cpu")) * 100).toFixed(4)}%`;
console.log(
  `Off path of one exec's span helper: ${guard.offNs.toFixed(1)} ns (hooks removed: ${guard.removedNs.toFixed(1)} ns), so off costs ${guard.perCellNs.toFixed(1)} ns per cell = ${guard.shareOfC1} of C1's CPU; a nested call's off path is a null check of its parent's span, no call into the tracing module.`,
);
mkdirSync(join(here, "../bench-results"), { recursive: true });
writeFileSync(
  join(here, "../bench-results/tracing.json"),
  `${JSON.stringify({ rounds: ROUNDS, loadAverage: loadavg(), rows, guard, raw: perMode }, null, 2)}\n`,
);
