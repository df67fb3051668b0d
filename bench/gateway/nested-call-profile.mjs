// Where the CPU time of one nested call goes: `pnpm --filter @codecell/bench bench:profile`.
// Runs the C2k cell (1,000 sequential `await tools.inc(...)`) through the embedded engine in a child
// process with V8 CPU profiles on the main thread and on the sandbox worker (CODECELL_WORKER_CPU_PROF_DIR),
// measures each thread's CPU time per call (schedstat, nanoseconds), and splits it by what the profile
// samples were doing. Shares of samples are what load distorts least; the µs column is the share times
// this run's CPU per call, so compare shares across runs and µs only on a quiet machine.
// The engine and the sandbox worker run from bundles (dist/bundle/engine.js,
// sandbox-worker.bundle.cjs): a sample is put to the source file its bundle's source map names, so the
// categories below read package/src paths. BENCH_PROFILE_TOP=n prints each thread's n busiest functions.
// Writes bench-results/nested-call-profile.json. Run after a build.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { SourceMap } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { threadCpuNanos } from "./measure.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const CALLS = 1000;
const RUNS = Number(process.env.BENCH_PROFILE_RUNS ?? 8);

if (process.argv[2] === "child") {
  const { createCodeModeEngine } = await import("@codecell/engine");
  const { prepareBenchRun } = await import("./bench-tools.mjs");
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
  const run = prepareBenchRun(engine);
  const code = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await tools.inc({ value: 1 }); return s;`;
  let id = 0;
  const exec = async () => {
    const result = await run.exec({ code }, { toolCallId: `p${++id}` });
    if (result.value !== CALLS) throw new Error(JSON.stringify(result).slice(0, 300));
  };
  await exec();
  const before = threadCpuNanos();
  for (let index = 0; index < RUNS; index++) await exec();
  const after = threadCpuNanos();
  let main = 0;
  let worker = 0;
  for (const [tid, nanos] of after) {
    const used = nanos - (before.get(tid) ?? 0);
    if (tid === String(process.pid)) main = used;
    else worker = Math.max(worker, used);
  }
  const calls = CALLS * RUNS;
  process.stdout.write(
    `${JSON.stringify({ mainMicros: main / 1000 / calls, workerMicros: worker / 1000 / calls })}\n`,
  );
  await engine.close();
  process.exit(0);
}

// What a sample was doing, first match wins. Module loading is start-up, not the call, and is left out.
const CATEGORIES = [
  ["idle", (fn) => fn === "(idle)"],
  // The sandbox worker asleep in Atomics.wait on the host's doorbell: V8 samples it as the waiting
  // function, not as idle, but it is no CPU time.
  ["idle", (fn) => fn === "serveWaitingRuns"],
  [
    "start-up",
    (fn, url) =>
      /internal\/modules|esm\/|bootstrap\/|run_main/.test(url) ||
      /^(compileSourceTextModule|compileForInternalLoader|internalModuleStat|openFileHandle|readFileHandle|instantiate|compileFunction)$/.test(
        fn,
      ),
  ],
  [
    "thread channel (postMessage, message events)",
    (fn, url) =>
      fn === "postMessage" ||
      /messageport|internal\/worker|event_target|node:events|bridge\/src\/shared-channel/.test(url),
  ],
  [
    "message validation (bridge protocol)",
    (_fn, url) => /bridge\/(src|dist)\/(worker-protocol|protocol)\./.test(url),
  ],
  [
    "JSON and UTF-8 (bridge adapter, TextEncoder/Decoder)",
    (fn, url) =>
      /json-adapter|json-depth|double-zero|internal\/encoding/.test(url) ||
      /^(encodeUtf8String|decodeUTF8|stringify|parse)$/.test(fn),
  ],
  ["trajectory", (_fn, url) => /engine\/(src|dist)\/trajectory/.test(url)],
  ["telemetry", (_fn, url) => /engine\/(src|dist)\/run-telemetry/.test(url)],
  ["catalog resolution", (_fn, url) => /catalog\/(src|dist)/.test(url)],
  ["abort bookkeeping (AbortController, signals)", (_fn, url) => /abort_controller/.test(url)],
  [
    "executor dispatch, in-flight table, the tool",
    (_fn, url) =>
      /engine\/(src|dist)\/(nested-calls|prepared-run|inflight-calls|call-cancellation)|bench-tools/.test(
        url,
      ),
  ],
  [
    "driving the run (drive-segment, sandbox run and pool)",
    (_fn, url) => /drive-segment|sandbox-run|sandbox-pool/.test(url),
  ],
  [
    "QuickJS: the guest and the prelude (wasm)",
    (fn, url) => url.startsWith("wasm:") || fn === "GenericJSToWasmWrapper",
  ],
  ["quickjs-wasi glue (handles, strings, host calls)", (_fn, url) => /quickjs-wasi/.test(url)],
  ["worker bridge (sandbox-worker.js)", (_fn, url) => /sandbox\/src\/worker\//.test(url)],
  ["garbage collection", (fn) => fn === "(garbage collector)"],
  ["promise jobs and timers", (_fn, url) => /task_queues|internal\/timers/.test(url)],
];

/** Source maps of bundled files by URL (null: none beside the file). */
const sourceMaps = new Map();

/** The file a sample's code came from: through the bundle's source map where there is one. */
function sourceOf({ url, lineNumber, columnNumber }) {
  if (!url.startsWith("file://")) return url;
  if (!sourceMaps.has(url)) {
    const mapFile = `${fileURLToPath(url)}.map`;
    sourceMaps.set(
      url,
      existsSync(mapFile) ? new SourceMap(JSON.parse(readFileSync(mapFile, "utf8"))) : null,
    );
  }
  const map = sourceMaps.get(url);
  const entry = map?.findEntry(lineNumber, columnNumber);
  if (!entry?.originalSource) return url;
  return resolve(dirname(fileURLToPath(url)), entry.originalSource.replace(/^file:\/\//, ""));
}

function shares(file) {
  const profile = JSON.parse(readFileSync(file, "utf8"));
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const totals = new Map();
  const functions = new Map();
  let busy = 0;
  let workerSamples = 0;
  for (let index = 0; index < profile.samples.length; index++) {
    const { callFrame } = nodes.get(profile.samples[index]);
    const functionName = callFrame.functionName;
    const url = sourceOf(callFrame);
    const delta = profile.timeDeltas[index] ?? 0;
    const category = (CATEGORIES.find(([, test]) => test(functionName, url)) ?? [
      "other (runtime, builtins)",
    ])[0];
    if (url.includes("sandbox-worker")) workerSamples++;
    totals.set(category, (totals.get(category) ?? 0) + delta);
    if (category !== "idle" && category !== "start-up") {
      busy += delta;
      const name = `${functionName || "(anonymous)"} ${url.replace(/^.*\/(packages|node_modules)\//, "")}`;
      functions.set(name, (functions.get(name) ?? 0) + delta);
    }
  }
  totals.delete("idle");
  totals.delete("start-up");
  const share = (entries) => new Map([...entries].map(([k, v]) => [k, v / busy]));
  return { workerSamples, busy, shares: share(totals), functions: share(functions) };
}

const dir = mkdtempSync(join(tmpdir(), "codecell-profile-"));
const child = spawnSync(
  process.execPath,
  ["--cpu-prof", `--cpu-prof-dir=${dir}`, "--cpu-prof-interval=100", fileURLToPath(import.meta.url), "child"],
  {
    cwd: join(here, "..", "..", "apps", "gateway"),
    env: { ...process.env, CODECELL_WORKER_CPU_PROF_DIR: dir },
    encoding: "utf8",
  },
);
if (child.status !== 0) throw new Error(`profiled child failed: ${child.stderr}`);
const perCall = JSON.parse(child.stdout.trim());
const profiles = readdirSync(dir)
  .filter((name) => name.endsWith(".cpuprofile"))
  .map((name) => ({ name, ...shares(join(dir, name)) }));
// The main thread's profile is thread 0 of the process; the sandbox worker is the one running its code.
const main = profiles.find((profile) => /\.0\.\d+\.cpuprofile$/.test(profile.name));
const worker = profiles.filter((p) => p !== main).sort((a, b) => b.workerSamples - a.workerSamples)[0];
rmSync(dir, { recursive: true, force: true });
if (!main || !worker) throw new Error("the main thread's or the sandbox worker's profile is missing");

const rows = [];
for (const [thread, profile, micros] of [
  ["main", main, perCall.mainMicros],
  ["worker", worker, perCall.workerMicros],
]) {
  for (const [category, share] of [...profile.shares].sort((a, b) => b[1] - a[1])) {
    if (share < 0.005) continue;
    rows.push({
      thread,
      "where the time goes": category,
      share: `${(share * 100).toFixed(0)}%`,
      "µs/call": Number((share * micros).toFixed(1)),
    });
  }
}
console.log(
  `\nOne nested call of C2k through the embedded engine: main thread ${perCall.mainMicros.toFixed(1)} µs CPU, sandbox worker ${perCall.workerMicros.toFixed(1)} µs CPU (${RUNS} x ${CALLS} calls; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")})`,
);
console.table(rows);
const top = Number(process.env.BENCH_PROFILE_TOP ?? 0);
for (const [thread, profile, micros] of top > 0
  ? [
      ["main", main, perCall.mainMicros],
      ["worker", worker, perCall.workerMicros],
    ]
  : []) {
  console.log(`\n${thread}: the ${top} functions with the most samples (self time)`);
  console.table(
    [...profile.functions]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, share]) => ({
        function: fn,
        share: `${(share * 100).toFixed(1)}%`,
        "µs/call": Number((share * micros).toFixed(1)),
      })),
  );
}
mkdirSync(join(here, "..", "bench-results"), { recursive: true });
writeFileSync(
  join(here, "..", "bench-results", "nested-call-profile.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), perCall, rows }, null, 2)}\n`,
);
