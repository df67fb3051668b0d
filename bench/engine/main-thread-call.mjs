// The host's main-thread work for one nested call, without the thread hop: `pnpm --filter
// @codecell/engine bench:main-thread` after a build. Runs C2k's shape (1,000 sequential calls of an async
// `inc` tool in one exec) through the real engine and the sandbox's real run handle, with the sandbox
// worker replaced by a stand-in on the main thread that answers each settle with the next request one
// event-loop turn later (setImmediate, as a message would arrive). What it prints is the engine's and
// the run handle's share of a nested call alone: bytes allocated and async resources (promises,
// microtasks, immediates: one immediate per call is the stand-in's) made per call, which load does not
// change, and main-thread CPU per call (schedstat), which it does. A second child, with Node's default
// heap sizes and the trajectory full (past 10,000 calls), reports garbage collection per call from V8's
// --trace-gc-nvp: scavenges, mark-compacts, bytes a call leaves alive past a scavenge and bytes promoted
// (load-independent), and pause time (not). The real channel (posting, the doorbell, the message event)
// is in the sandbox's bench/nested-call.mjs and the gateway's bench:profile.
// Writes bench-results/main-thread-call.json.

import { createHook } from "node:async_hooks";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const CALLS = 1000;
const RUNS = Number(process.env.BENCH_RUNS ?? 15);

/**
 * The window of `runs` cells whose garbage collections the parent reads from V8's trace, after enough
 * cells that the trajectory is full and evicting (a long session's steady state: 10,000 entries kept,
 * the oldest pushed out per call).
 */
async function measureGc(exec, runs) {
  for (let index = 0; index < 12; index++) await exec();
  const from = performance.now();
  for (let index = 0; index < runs; index++) await exec();
  return { gcWindow: { from, to: performance.now(), calls: runs * CALLS } };
}

/**
 * Sums V8's `--trace-gc-nvp` lines inside the window: pause time and count by kind, and bytes copied
 * within the young generation and promoted to the old one (what a call leaves alive is copied there,
 * and later marked and swept there).
 */
function gcFromTrace(trace, { from, to, calls }) {
  const sums = { scavenges: 0, markCompacts: 0, pauseMs: 0, survivedBytes: 0, promotedBytes: 0 };
  for (const line of trace.split("\n")) {
    const at = /\s(\d+) ms: pause=([\d.]+) .*?\bgc=(\w+)\b/.exec(line);
    if (!at || Number(at[1]) < from || Number(at[1]) > to) continue;
    if (at[3] === "s") sums.scavenges++;
    else if (at[3] === "mc") sums.markCompacts++;
    sums.pauseMs += Number(at[2]);
    sums.survivedBytes += Number(/\bnew_space_survived=(\d+)/.exec(line)?.[1] ?? 0);
    sums.promotedBytes += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0);
  }
  const per1000 = (value) => Number(((value * 1000) / calls).toFixed(2));
  return {
    scavengesPer1000Calls: per1000(sums.scavenges),
    markCompactsPer1000Calls: per1000(sums.markCompacts),
    gcPauseMsPer1000Calls: per1000(sums.pauseMs),
    survivedBytesPerCall: Math.round(sums.survivedBytes / calls),
    promotedBytesPerCall: Math.round(sums.promotedBytes / calls),
  };
}

async function measure(mode) {
  const { parseWorkerToHostMessage } = await import("@codecell/bridge");
  const { createCodeModeEngine } = await import("@codecell/engine");
  // The run handle is the sandbox's internal class; the bench reads it from the built package beside this one.
  const { RunHandle } = await import("../../packages/sandbox/dist/sandbox-run.js");

  /** The worker's side of one run: an idle with the next request per settle, then completed. */
  class StandInWorker {
    constructor(run, target) {
      this.run = run;
      this.target = target;
      this.issued = 0;
    }
    deliver(message) {
      setImmediate(() => this.run.receive(parseWorkerToHostMessage(message)));
    }
    next() {
      const { runId } = this.run;
      if (this.issued === CALLS) return { type: "completed", runId, value: CALLS, output: [] };
      this.issued++;
      const request = {
        requestId: `r${this.issued}`,
        kind: "call",
        target: this.target,
        input: { value: 1 },
      };
      return { type: "idle", runId, requests: [request], pending: [], output: [] };
    }
    post(message) {
      if (message.type === "start") {
        this.deliver({ type: "started", runId: this.run.runId, deadlineAt: Date.now() + 60_000 });
        this.deliver(this.next());
      } else if (message.type === "settle") this.deliver(this.next());
    }
    unresponsive() {
      throw new Error("the stand-in worker never stops answering");
    }
    detach() {}
  }

  let runs = 0;
  const pool = {
    run(options) {
      const run = new RunHandle({
        runId: `00000000-0000-4000-8000-${String(++runs).padStart(12, "0")}`,
        owner: options.owner,
        limits: options.limits,
        deadlineAt: options.deadlineAt,
        timeoutMs: options.timeoutMs,
        startupTimeoutMs: 30_000,
        signal: options.signal,
        onRequest: options.onRequest,
        maxBridgeValueBytes: 8 << 20,
        watchdogGraceMs: 100,
        restored: false,
      });
      const target = options.surface.toolFunctions.find((fn) => fn.name === "inc").toolId;
      run.placed();
      const worker = new StandInWorker(run, target);
      queueMicrotask(() =>
        run.attach(worker, {
          type: "start",
          runId: run.runId,
          deadlineAt: run.deadline,
          signal: run.abortFlag,
        }),
      );
      return run;
    },
    restore() {
      throw new Error("not used");
    },
    stats: () => ({ workers: 0, liveRuns: 0, workersReplaced: 0 }),
    close: async () => {},
  };
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 }, pool });
  const prepared = engine.prepareRun({
    tools: [
      {
        name: "inc",
        description: "Return the input value",
        parameters: { type: "object", properties: { value: { type: "number" } } },
        source: "plugin",
        owner: "bench",
      },
    ],
    context: { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" },
    executor: { callTool: async (call) => call.input.value },
  });
  let id = 0;
  const exec = async () => {
    const result = await prepared.exec({ code: "return 1" }, { toolCallId: `b${++id}` });
    if (result.value !== CALLS) throw new Error(`unexpected result ${JSON.stringify(result).slice(0, 200)}`);
  };
  const mainNanos = () =>
    Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

  if (mode === "gc") {
    const gc = await measureGc(exec, RUNS);
    await engine.close();
    return gc;
  }
  for (let index = 0; index < 5; index++) await exec();
  const cpu = [];
  for (let index = 0; index < RUNS; index++) {
    const before = mainNanos();
    await exec();
    cpu.push((mainNanos() - before) / 1000 / CALLS);
  }
  cpu.sort((a, b) => a - b);

  const resources = {};
  const hook = createHook({
    init(_id, type) {
      resources[type] = (resources[type] ?? 0) + 1;
    },
  });
  hook.enable();
  await exec();
  hook.disable();

  // The young generation is made large enough (in the child's flags) that no GC runs during a cell:
  // the heap's growth is then what the cell allocated.
  const bytes = [];
  for (let index = 0; index < 3; index++) {
    globalThis.gc();
    await settle();
    globalThis.gc();
    await settle();
    const before = process.memoryUsage().heapUsed;
    await exec();
    bytes.push((process.memoryUsage().heapUsed - before) / CALLS);
  }
  bytes.sort((a, b) => a - b);
  await engine.close();
  return {
    cpuMicrosMedian: cpu[Math.floor(cpu.length / 2)],
    cpuMicrosMin: cpu[0],
    asyncResourcesPerCall: Object.fromEntries(
      Object.entries(resources)
        .map(([type, count]) => [type, Number((count / CALLS).toFixed(2))])
        .filter(([, perCall]) => perCall > 0),
    ),
    bytesPerCall: Math.round(bytes[1]),
  };
}

if (process.argv[2] === "child") {
  process.stdout.write(`${JSON.stringify(await measure(process.argv[3]))}\n`);
  process.exit(0);
}

function runChild(flags, mode, env = process.env) {
  const child = spawnSync(process.execPath, [...flags, fileURLToPath(import.meta.url), "child", mode], {
    encoding: "utf8",
    env,
    maxBuffer: 256 << 20,
  });
  if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
  const lines = child.stdout.trim().split("\n");
  return { result: JSON.parse(lines.at(-1)), trace: lines.slice(0, -1).join("\n") };
}

const measured = runChild(["--expose-gc", "--min-semi-space-size=128", "--max-semi-space-size=128"], "cpu");
// Node's default heap sizes, as a host runs, and no early sandbox worker (its isolate would trace too).
const traced = runChild(["--trace-gc-nvp"], "gc", { ...process.env, CODECELL_SANDBOX_EARLY_START: "0" });
const result = { ...measured.result, ...gcFromTrace(traced.trace, traced.result.gcWindow) };
console.log(
  `\nMain-thread work of one nested call (engine and run handle, worker stood in; ${RUNS} x ${CALLS} calls; load average ${loadavg()
    .map((load) => load.toFixed(1))
    .join(" ")})`,
);
console.table({
  "CPU µs per call, median (load changes it)": Number(result.cpuMicrosMedian.toFixed(2)),
  "CPU µs per call, best run": Number(result.cpuMicrosMin.toFixed(2)),
  "bytes allocated per call": result.bytesPerCall,
  "bytes a call leaves alive past a scavenge (copied in the young generation)": result.survivedBytesPerCall,
  "bytes promoted to the old generation per call": result.promotedBytesPerCall,
  "scavenges per 1,000 calls": result.scavengesPer1000Calls,
  "mark-compacts per 1,000 calls": result.markCompactsPer1000Calls,
  "GC pause ms per 1,000 calls (load changes it)": result.gcPauseMsPer1000Calls,
  ...Object.fromEntries(
    Object.entries(result.asyncResourcesPerCall).map(([type, perCall]) => [`${type} made per call`, perCall]),
  ),
});
mkdirSync(join(here, "..", "bench-results"), { recursive: true });
writeFileSync(
  join(here, "..", "bench-results", "main-thread-call.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), ...result }, null, 2)}\n`,
);
