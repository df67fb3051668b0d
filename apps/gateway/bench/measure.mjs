// Measuring helpers shared by performance.bench.mjs, nested-call-profile.mjs and the side-by-side run
// against other runtimes (bench/peers), so each figure is taken the same way everywhere.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

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
      cwd: fileURLToPath(new URL("..", import.meta.url)),
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
