// Measuring helpers shared by performance.bench.mjs, nested-call-profile.mjs and the side-by-side run
// against other runtimes (bench/peers), so each figure is taken the same way everywhere.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

/** The middle value (the upper one of an even count); NaN when there is none. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor(sorted.length / 2)];
}

/**
 * CPU time of each thread of this process in nanoseconds (/proc/self/task/<tid>/schedstat: time on a
 * CPU, at nanosecond resolution). Load does not add to it, so it is the figure to compare on a busy
 * machine. The main thread's id is the process id; the engine's sandbox worker is the busiest other.
 */
export function threadCpuNanos() {
  const threads = new Map();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      threads.set(tid, Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return threads;
}

/** The thread of this process, other than the main one, that has used the most CPU: the sandbox worker. */
export function busiestOtherThread() {
  let busiest = null;
  let most = -1;
  for (const [tid, nanos] of threadCpuNanos()) {
    if (tid !== String(process.pid) && nanos > most) [busiest, most] = [tid, nanos];
  }
  return busiest;
}

/** The CPU a thread of this process last ran on (field 39 of its stat), or null when it has ended. */
export function lastCpuOf(tid) {
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[36]);
  } catch {
    return null;
  }
}

/** Whether the main thread and `tid` last ran on the same CPU (null when that cannot be read). */
export function sharesMainCpu(tid) {
  const theirs = tid === null ? null : lastCpuOf(tid);
  const ours = lastCpuOf(String(process.pid));
  return theirs === null || ours === null ? null : theirs === ours;
}

/** C5: `count` trivial cells through `run(code)`, 4 in flight at a time; cells per second. */
export async function cellsPerSecond(run, count, label) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < count) {
        next += 1;
        if ((await run("return 1 + 1")) !== 2) throw new Error(`${label}: C5 cell failed`);
      }
    }),
  );
  return (count / (performance.now() - started)) * 1000;
}

/**
 * One measurement of performance-child.mjs (`cold|rss floor|engine`) in a fresh process of this Node,
 * with `execArgv` (V8 flags) before the script: the one JSON line it prints.
 */
export function runPerformanceChild(args, execArgv = []) {
  const script = fileURLToPath(new URL("./performance-child.mjs", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...execArgv, script, ...args], {
      stdio: ["ignore", "pipe", "inherit"],
      cwd: fileURLToPath(new URL("../../apps/gateway/", import.meta.url)),
    });
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim()))
        : reject(new Error(`performance-child ${[...execArgv, ...args].join(" ")} exited ${code}`)),
    );
  });
}

// The worker of threadHopMicros: it answers each number the main thread writes to word 0 by writing it
// to word 1, sleeping in Atomics.wait (mode 0) or spinning (mode 1) in between; a negative number ends it.
const HOP_WORKER = `
const { workerData } = require("node:worker_threads");
const words = new Int32Array(workerData);
let seen = 0;
for (;;) {
  if (Atomics.load(words, 2) === 0) Atomics.wait(words, 0, seen);
  const next = Atomics.load(words, 0);
  if (next < 0) break;
  if (next === seen) continue;
  seen = next;
  Atomics.store(words, 1, next);
  Atomics.notify(words, 1);
}`;

/**
 * What one thread hop costs on this machine: round trips between this thread and a worker thread
 * through shared words and nothing else, with both threads asleep in Atomics.wait between messages (how
 * a thread waits when it does not spin) and with both spinning. Median µs per round trip of `batches`
 * batches of `trips`. The goal for C2, the floor plus one thread hop per call, was set with a
 * hop of 13-14 µs measured on this kind of machine; a hop between two sleeping threads costs what
 * waking a CPU costs where the bench runs, so the bench reports it beside C2.
 */
export async function threadHopMicros({ trips = 2_000, batches = 5 } = {}) {
  const words = new Int32Array(new SharedArrayBuffer(12));
  const worker = new Worker(HOP_WORKER, { eval: true, workerData: words.buffer });
  await new Promise((resolve, reject) => {
    worker.once("online", resolve);
    worker.once("error", reject);
  });
  let sent = 0;
  const batch = (spinning) => {
    Atomics.store(words, 2, spinning ? 1 : 0);
    const started = performance.now();
    for (let trip = 0; trip < trips; trip++) {
      sent += 1;
      Atomics.store(words, 0, sent);
      Atomics.notify(words, 0);
      while (Atomics.load(words, 1) !== sent) if (!spinning) Atomics.wait(words, 1, sent - 1, 10);
    }
    return ((performance.now() - started) * 1000) / trips;
  };
  const sleeping = [];
  const spinningTimes = [];
  batch(false);
  for (let index = 0; index < batches; index++) {
    sleeping.push(batch(false));
    spinningTimes.push(batch(true));
  }
  Atomics.store(words, 0, -1);
  Atomics.notify(words, 0);
  await worker.terminate();
  return { sleeping: median(sleeping), spinning: median(spinningTimes) };
}
