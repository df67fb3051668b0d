// Where the kernel puts the engine's two busy threads, and what it costs a loop of nested calls:
// `pnpm --filter @codecell/bench bench:placement` (also part of `pnpm bench`). Run after a build.
//
// A real cell follows the model's think time, so it starts on an idle machine. Measured on the
// development machines, C2 (100 sequential awaited calls) through a warm engine took about twice as long after a 50 ms
// pause as back to back, while the floor (one thread) did not change; the main thread and the sandbox
// worker had been placed on one CPU for most of those calls, and pinning the whole process to one CPU
// (`taskset -c 0`) made back-to-back cells exactly as slow. This bench keeps that measured: in a fresh
// child per placement, after WARM C2 cells (V8 has optimised the path by then), it times C2 back to back
// and after a pause, then, in a pass of its own (reading /proc at each call costs time), counts the calls
// during which both threads last ran on the same CPU, then times the floor the same way. Where taskset
// (util-linux) is installed it runs twice more: with the whole process pinned to one CPU, and with the
// main thread and the sandbox worker pinned to two different CPUs once warm (`taskset -p` on each
// thread), which shows what a nested call costs when the two threads are never put on one CPU. It also
// prints the scheduler settings of the kernel's command line that change placement (sched_vcpu_pack on
// the test machines), since the "as placed" rows follow them.
// Writes bench-results/placement.json.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { busiestOtherThread, median, sharesMainCpu } from "./measure.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const WARM = Number(process.env.BENCH_PLACEMENT_WARM ?? 150);
const CELLS_PER_MODE = Number(process.env.BENCH_PLACEMENT_CELLS ?? 15);
const PAUSE_MS = 50;

const fixed = (value, digits) => (Number.isFinite(value) ? Number(value.toFixed(digits)) : null);

if (process.argv[2] === "child") {
  const { createCodeModeEngine } = await import("@codecell/engine");
  const { CELLS, prepareBenchRun } = await import("./bench-tools.mjs");
  const { floorRun, loadFloor } = await import("./floor.mjs");

  const floor = await loadFloor();
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
  /** Called at every nested call: timestamps for the gaps, or a placement sample. */
  let onCall = () => {};
  const run = prepareBenchRun(engine, () => onCall());
  let id = 0;
  const engineCell = async () => {
    const result = await run.exec({ code: CELLS.C2.code }, { toolCallId: `p${++id}` });
    if (result.value !== CELLS.C2.expect) throw new Error(JSON.stringify(result).slice(0, 300));
  };
  const floorCell = () => floorRun(floor, CELLS.C2.code, false);
  const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  for (let index = 0; index < WARM; index++) {
    await engineCell();
    if (index % 10 === 0) await floorCell();
  }

  const worker = busiestOtherThread();
  const apart = process.env.BENCH_PLACEMENT_APART?.split(",");
  if (apart !== undefined) {
    // Only these two threads: V8's helpers and libuv's pool stay where the kernel puts them.
    execFileSync("taskset", ["-p", "-c", apart[0], String(process.pid)], { stdio: "ignore" });
    execFileSync("taskset", ["-p", "-c", apart[1], worker], { stdio: "ignore" });
  }

  const modes = { "back to back": async () => {}, [`after a ${PAUSE_MS} ms pause`]: pause };
  const out = {};
  for (const [mode, before] of Object.entries(modes)) {
    const engineMs = [];
    const floorMs = [];
    const gaps = [];
    for (let index = 0; index < CELLS_PER_MODE; index++) {
      const stamps = [];
      onCall = () => stamps.push(performance.now());
      await before();
      const started = performance.now();
      await engineCell();
      engineMs.push(performance.now() - started);
      for (let call = 1; call < stamps.length; call++) gaps.push((stamps[call] - stamps[call - 1]) * 1000);
      onCall = () => {};
    }
    // Placement, in a pass of its own: at each call, whether both threads last ran on one CPU.
    let same = 0;
    let sampled = 0;
    onCall = () => {
      const shared = sharesMainCpu(worker);
      if (shared === null) return;
      sampled += 1;
      if (shared) same += 1;
    };
    for (let index = 0; index < Math.ceil(CELLS_PER_MODE / 3); index++) {
      await before();
      await engineCell();
    }
    onCall = () => {};
    for (let index = 0; index < CELLS_PER_MODE; index++) {
      await before();
      const started = performance.now();
      await floorCell();
      floorMs.push(performance.now() - started);
    }
    out[mode] = {
      engineMs: fixed(median(engineMs), 2),
      floorMs: fixed(median(floorMs), 2),
      gapMicros: fixed(median(gaps), 1),
      sameCpuShare: sampled === 0 ? null : fixed(same / sampled, 2),
    };
  }
  await engine.close();
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

/**
 * One child, started as is or under `prefix` (a command that runs the rest), with `env` added to this
 * process's environment: its figures.
 */
function child(prefix = [], env = {}) {
  const [command, ...args] = [...prefix, process.execPath, join(here, "placement.mjs"), "child"];
  const result = spawnSync(command, args, {
    encoding: "utf8",
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  if (result.status !== 0) throw new Error(`placement child (${prefix.join(" ") || "as is"}) failed`);
  return JSON.parse(result.stdout.trim().split("\n").at(-1));
}

/**
 * The first two CPUs this process may run on (Linux's Cpus_allowed_list, e.g. "0-1" or "2,5"): fewer
 * where it may use fewer, none without /proc.
 */
function firstTwoAllowedCpus() {
  let list;
  try {
    list = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
  } catch {
    return [];
  }
  const cpus = [];
  for (const part of list?.split(",") ?? []) {
    const [first, last = first] = part.split("-").map(Number);
    for (let cpu = first; cpu <= last && cpus.length < 2; cpu++) cpus.push(String(cpu));
  }
  return cpus;
}

/** Whether taskset (util-linux) runs here, pinning to `cpu`. */
function tasksetRuns(cpu) {
  try {
    execFileSync("taskset", ["-c", cpu, "true"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * Scheduler settings on the kernel's command line that change where a woken thread goes (Linux only):
 * the test machines' guest kernel boots with `sched_vcpu_pack=N`, a vCPU-packing patch mainline Linux
 * lacks, which puts a woken thread on its waker's busy vCPU while there is room (see FINDINGS.md, "The
 * guest kernel packs threads onto one vCPU"). Printed beside the rows, since the "as placed" ones depend
 * on it.
 */
function kernelPlacementPolicy() {
  let commandLine;
  try {
    commandLine = readFileSync("/proc/cmdline", "utf8");
  } catch {
    return null;
  }
  const settings = commandLine
    .split(/\s+/)
    .filter((word) => /^(sched_vcpu_pack|isolcpus|nohz_full)=/.test(word));
  return settings.length > 0 ? settings.join(" ") : null;
}

const placements = { "as the kernel places them": child() };
const placementPolicy = kernelPlacementPolicy();
const [firstCpu, secondCpu] = firstTwoAllowedCpus();
let pinnedNote = null;
if (secondCpu === undefined)
  pinnedNote = "fewer than two CPUs allowed (or no /proc): the pinned rows would say nothing more";
else if (!tasksetRuns(firstCpu))
  pinnedNote = "taskset (util-linux) is not installed: the pinned rows are left out";
else {
  placements[`pinned to one CPU (taskset -c ${firstCpu})`] = child(["taskset", "-c", firstCpu]);
  placements["main thread and worker pinned apart"] = child([], {
    BENCH_PLACEMENT_APART: `${firstCpu},${secondCpu}`,
  });
}

const rows = [];
for (const [placement, modes] of Object.entries(placements)) {
  for (const [mode, figures] of Object.entries(modes)) {
    rows.push({
      placement,
      cell: `C2 ${mode}`,
      "engine ms": figures.engineMs,
      "floor ms": figures.floorMs,
      "engine / floor": fixed(figures.engineMs / figures.floorMs, 2),
      "engine µs between calls": figures.gapMicros,
      "calls with both threads on one CPU": figures.sameCpuShare,
    });
  }
}
const load = loadavg().map((value) => value.toFixed(1));
console.log(
  `\nC2 through a warm engine (${WARM} cells in), by where the kernel runs its two threads (medians of ${CELLS_PER_MODE}; load average ${load.join(" ")})`,
);
console.table(rows);
if (pinnedNote !== null) console.log(`Skipped: ${pinnedNote}.`);
console.log(
  placementPolicy === null
    ? "The kernel's command line sets nothing known to change where a woken thread goes."
    : `The kernel's command line sets ${placementPolicy}: the "as the kernel places them" rows follow that policy${
        placementPolicy.includes("sched_vcpu_pack")
          ? " (sched_vcpu_pack, a vCPU-packing patch, puts a woken thread on its waker's busy CPU)"
          : ""
      }.`,
);
const resultsDir = join(here, "..", "bench-results");
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  join(resultsDir, "placement.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), warm: WARM, cells: CELLS_PER_MODE, pauseMs: PAUSE_MS, rows, skipped: pinnedNote, kernelPlacementPolicy: placementPolicy }, null, 2)}\n`,
);
