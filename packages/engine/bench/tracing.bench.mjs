// What OpenTelemetry tracing costs a cell: C1 (`return 1 + 1`) and a cell of 100 sequential nested
// calls, with tracing off (no tracer provider registered: the engine does not even load the API), on
// with a sampler that keeps nothing (the provider is there, every exec span is dropped at its start),
// and on with every span recorded and exported (the SDK's batch processor into an in-memory exporter:
// encoding and sending OTLP happen later, off the cell's path, in the batch). Each mode runs in a fresh
// process of its own, because registering a provider is for the whole process; the modes take turns
// over several rounds so that a busy machine weighs on all of them alike. Prints a table and writes
// bench-results/tracing.json. Run after a build.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const MODES = ["off", "sampler 0", "all exported"];
const ROUNDS = Number(process.env.TRACING_BENCH_ROUNDS ?? 3);
const C1_RUNS = 300;
const LOOP_RUNS = 60;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function child(mode) {
  let spans = () => 0;
  if (mode !== "off") {
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
  const { createCodeModeEngine } = await import("../dist/index.js");
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
  await engine.close();
  return { c1: c1.wall, c1Cpu: c1.cpu, loop: loop.wall, loopCpu: loop.cpu, spansSeen: spans(), apiLoaded };
}

if (process.argv[2] === "--child") {
  const result = await child(process.argv[3]);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

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
const versus = (mode, key) => `${(((of(mode, key) - of("off", key)) / of("off", key)) * 100).toFixed(1)}%`;
const rows = MODES.map((mode) => ({
  mode,
  "C1 wall µs": Math.round(of(mode, "c1")),
  "C1 CPU µs": Math.round(of(mode, "c1Cpu")),
  "C1 CPU vs off": versus(mode, "c1Cpu"),
  "100 calls wall µs": Math.round(of(mode, "loop")),
  "100 calls CPU µs": Math.round(of(mode, "loopCpu")),
  "100 calls CPU vs off": versus(mode, "loopCpu"),
  "CPU per nested call µs": Number(((of(mode, "loopCpu") - of("off", "loopCpu")) / 100).toFixed(2)),
  "spans exported": perMode[mode].reduce((sum, result) => sum + result.spansSeen, 0) > 0,
  "API loaded": perMode[mode].some((result) => result.apiLoaded),
}));
console.log(
  `Tracing cost per cell: medians over ${ROUNDS} fresh processes per mode (${C1_RUNS} C1 runs, ${LOOP_RUNS} runs of 100 calls each); load average ${loadavg()[0].toFixed(1)}`,
);
console.table(rows);
mkdirSync(join(here, "../bench-results"), { recursive: true });
writeFileSync(
  join(here, "../bench-results/tracing.json"),
  `${JSON.stringify({ rounds: ROUNDS, rows, raw: perMode }, null, 2)}\n`,
);
