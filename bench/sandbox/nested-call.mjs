// CPU cost of one nested host call through the sandbox alone (no engine): `node bench/sandbox/nested-call.mjs`
// after a build. Runs a cell of CALLS sequential `await tools.inc(...)` the way the engine drives it
// (wait for the idle event, then settle what is pending) and prints CPU µs per call by thread from
// /proc/self/task/*/schedstat, which load distorts far less than wall time. With --profile (or
// NESTED_CALL_PROFILE=1) the main thread and the sandbox worker write V8 CPU profiles and the table
// splits each thread's time by what its samples were doing (KEEP_PROFILES=1 keeps the files). Writes
// bench-results/nested-call.json. NESTED_CALLS and NESTED_RUNS set the cell's calls and the runs;
// NESTED_THREADS=1 lists every thread's share.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const CALLS = Number(process.env.NESTED_CALLS ?? 1000);
const RUNS = Number(process.env.NESTED_RUNS ?? 5);

/**
 * Per thread: CPU ns (schedstat), user and system clock ticks (stat fields 14 and 15, 10 ms each) and
 * context switches; under load the system time and the switches grow, the user time much less.
 */
function threadCpuNanos() {
  const threads = new Map();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const nanos = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const status = readFileSync(`/proc/self/task/${tid}/status`, "utf8");
      const switches =
        Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0) +
        Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
      threads.set(tid, { nanos, user: Number(fields[11]), system: Number(fields[12]), switches });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return threads;
}

async function measure() {
  const { createSandboxPool } = await import("@codecell/sandbox");
  const pool = createSandboxPool({ size: 1 });
  const limits = {
    memoryLimitBytes: 64 << 20,
    maxOutputBytes: 1 << 20,
    maxPendingToolCalls: 16,
    maxSnapshotBytes: 10 << 20,
  };
  const surface = {
    allTools: [{ id: "core:bench:inc", name: "inc", description: "Add one", source: "core" }],
    toolFunctions: [{ name: "inc", toolId: "core:bench:inc" }],
    mcpServers: [],
    apiFiles: [],
    namespaces: [],
  };
  const code = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await tools.inc({ value: 1 }); return s;`;
  const runCell = async () => {
    const answers = new Map();
    const run = pool.run({
      code,
      language: "javascript",
      surface,
      limits,
      timeoutMs: 60_000,
      onRequest(request) {
        // A tool answers through a promise, as the engine's executor does.
        Promise.resolve(request.input.value).then((value) => answers.set(request.requestId, value));
      },
    });
    for (;;) {
      const event = await run.next();
      if (event.type === "completed") {
        if (event.value !== CALLS) throw new Error(`wrong result ${JSON.stringify(event.value)}`);
        return;
      }
      if (event.type === "failed") throw new Error(`${event.code}: ${event.message}`);
      // Idle: the engine waits for results, then settles every one that is ready.
      while (answers.size === 0) await new Promise((resolve) => setImmediate(resolve));
      for (const [requestId, value] of answers) run.settle(requestId, { ok: true, value });
      answers.clear();
    }
  };
  await runCell();
  const before = threadCpuNanos();
  const started = performance.now();
  for (let index = 0; index < RUNS; index++) await runCell();
  const wall = performance.now() - started;
  const after = threadCpuNanos();
  const zero = { nanos: 0, user: 0, system: 0, switches: 0 };
  const used = (tid) => {
    const a = after.get(tid);
    const b = before.get(tid) ?? zero;
    return {
      nanos: a.nanos - b.nanos,
      user: a.user - b.user,
      system: a.system - b.system,
      switches: a.switches - b.switches,
    };
  };
  const main = used(String(process.pid));
  let worker = zero;
  let all = 0;
  for (const tid of after.keys()) {
    if (tid === String(process.pid)) continue;
    const thread = used(tid);
    all += thread.nanos;
    if (thread.nanos > worker.nanos) worker = thread;
  }
  const calls = Math.max(1, CALLS) * RUNS;
  if (process.env.NESTED_THREADS) {
    for (const tid of after.keys()) {
      let name = "?";
      try {
        name = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      } catch {}
      process.stderr.write(`${tid} ${name} ${(used(tid).nanos / 1000 / calls).toFixed(1)} µs/call\n`);
    }
  }
  const { answersCaught, spinsEmpty } = pool.stats();
  await pool.close();
  const tick = 10_000; // µs per clock tick
  return {
    mainMicros: main.nanos / 1000 / calls,
    workerMicros: worker.nanos / 1000 / calls,
    otherMicros: (all - worker.nanos) / 1000 / calls,
    wallMicros: (wall * 1000) / calls,
    mainUserMicros: (main.user * tick) / calls,
    mainSystemMicros: (main.system * tick) / calls,
    workerUserMicros: (worker.user * tick) / calls,
    workerSystemMicros: (worker.system * tick) / calls,
    mainSwitches: main.switches / calls,
    workerSwitches: worker.switches / calls,
    // Of the host's spins for the worker's answer (shared channel), how many caught it (all runs).
    answersCaught,
    spinsEmpty,
  };
}

if (process.argv[2] === "child") {
  process.stdout.write(`${JSON.stringify(await measure())}\n`);
  process.exit(0);
}

const CATEGORIES = [
  ["idle", (fn) => fn === "(idle)" || fn === "(program)"],
  // The sandbox worker asleep in Atomics.wait on the host's doorbell: V8 samples it as the waiting
  // function, not as idle, but it is no CPU time.
  ["idle", (fn) => fn === "serveWaitingRuns"],
  ["start-up", (_fn, url) => /internal\/modules|esm\/|bootstrap\//.test(url)],
  [
    "thread channel (postMessage, message events)",
    (fn, url) => fn === "postMessage" || /messageport|internal\/worker|event_target|node:events/.test(url),
  ],
  ["message validation", (_fn, url) => /bridge\/dist\/(worker-protocol|protocol)/.test(url)],
  [
    "JSON (bridge adapter, depth)",
    (fn, url) => /json-adapter|json-depth/.test(url) || /^(stringify|parse)$/.test(fn),
  ],
  ["sandbox run and pool (host side)", (_fn, url) => /sandbox-run|sandbox-pool/.test(url)],
  ["QuickJS (wasm)", (fn, url) => url.startsWith("wasm:") || fn === "GenericJSToWasmWrapper"],
  ["quickjs-wasi glue", (_fn, url) => /quickjs-wasi/.test(url)],
  ["worker bridge (sandbox-worker.js)", (_fn, url) => /sandbox-worker/.test(url)],
  ["garbage collection", (fn) => fn === "(garbage collector)"],
  ["promise jobs and timers", (_fn, url) => /task_queues|internal\/timers/.test(url)],
  ["this bench's driver", (_fn, url) => /nested-call\.mjs/.test(url)],
];

function shares(file) {
  const profile = JSON.parse(readFileSync(file, "utf8"));
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const totals = new Map();
  let busy = 0;
  let workerSamples = 0;
  for (let index = 0; index < profile.samples.length; index++) {
    const { functionName, url } = nodes.get(profile.samples[index]).callFrame;
    const delta = profile.timeDeltas[index] ?? 0;
    const category = (CATEGORIES.find(([, test]) => test(functionName, url)) ?? [
      "other (runtime, builtins)",
    ])[0];
    if (url.includes("sandbox-worker")) workerSamples++;
    totals.set(category, (totals.get(category) ?? 0) + delta);
    if (category !== "idle" && category !== "start-up") busy += delta;
  }
  totals.delete("idle");
  totals.delete("start-up");
  return { workerSamples, shares: new Map([...totals].map(([k, v]) => [k, v / busy])) };
}

const profile = process.argv.includes("--profile") || process.env.NESTED_CALL_PROFILE === "1";
const dir = profile ? mkdtempSync(join(tmpdir(), "codecell-nested-")) : null;
const child = spawnSync(
  process.execPath,
  [
    ...(dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`, "--cpu-prof-interval=100"] : []),
    fileURLToPath(import.meta.url),
    "child",
  ],
  { env: { ...process.env, ...(dir ? { CODECELL_WORKER_CPU_PROF_DIR: dir } : {}) }, encoding: "utf8" },
);
if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
if (process.env.NESTED_THREADS) process.stderr.write(child.stderr);
const perCall = JSON.parse(child.stdout.trim());
console.log(
  `sandbox nested call (${RUNS} x ${CALLS}): main ${perCall.mainMicros.toFixed(1)} µs, worker ${perCall.workerMicros.toFixed(1)} µs, other threads ${perCall.otherMicros.toFixed(1)} µs CPU per call; wall ${perCall.wallMicros.toFixed(1)} µs (load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")})`,
);
console.log(
  `  host spins for the answer: ${perCall.answersCaught} caught it, ${perCall.spinsEmpty} ended empty (${Math.max(1, CALLS) * (RUNS + 1)} calls)\n  user/system µs: main ${perCall.mainUserMicros.toFixed(0)}/${perCall.mainSystemMicros.toFixed(0)}, worker ${perCall.workerUserMicros.toFixed(0)}/${perCall.workerSystemMicros.toFixed(0)}; context switches per call: main ${perCall.mainSwitches.toFixed(2)}, worker ${perCall.workerSwitches.toFixed(2)}`,
);
if (dir) {
  const profiles = readdirSync(dir)
    .filter((name) => name.endsWith(".cpuprofile"))
    .map((name) => ({ name, ...shares(join(dir, name)) }));
  const main = profiles.find((p) => /\.0\.\d+\.cpuprofile$/.test(p.name));
  const worker = profiles.filter((p) => p !== main).sort((a, b) => b.workerSamples - a.workerSamples)[0];
  if (!process.env.KEEP_PROFILES) rmSync(dir, { recursive: true, force: true });
  else console.log("profiles in", dir);
  const rows = [];
  for (const [thread, p, micros] of [
    ["main", main, perCall.mainMicros],
    ["worker", worker, perCall.workerMicros],
  ]) {
    if (!p) continue;
    for (const [category, share] of [...p.shares].sort((a, b) => b[1] - a[1])) {
      if (share < 0.005) continue;
      rows.push({
        thread,
        where: category,
        share: `${(share * 100).toFixed(0)}%`,
        "µs/call": +(share * micros).toFixed(1),
      });
    }
  }
  console.table(rows);
}

const here = fileURLToPath(new URL(".", import.meta.url));
mkdirSync(join(here, "..", "bench-results"), { recursive: true });
writeFileSync(
  join(here, "..", "bench-results", "nested-call.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), calls: CALLS, runs: RUNS, perCall }, null, 2)}\n`,
);
