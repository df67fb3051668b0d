import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { Worker } from "node:worker_threads";
import { loadQuickJsModule, preludeFor } from "./wasm-module.js";

// The sandbox's process-wide state is here and in wasm-module.ts (the early worker; the compiled module
// and the prelude bytecode checked against it). A bundler that inlines the rest of the sandbox (the
// gateway's CLI does) takes both modules' exports from this entry instead, so the process holds one copy
// of that state, the one this entry started the worker with.
export {
  defaultWasmPath,
  keepFunctionExports,
  loadQuickJsModule,
  preludeFor,
  QUICKJS_EXPORTS_USED,
} from "./wasm-module.js";

const WORKER_SCRIPT_URL = new URL("./worker/sandbox-worker.js", import.meta.url);
const WORKER_BUNDLE_URL = new URL("./worker/sandbox-worker.bundle.cjs", import.meta.url);
/**
 * The worker's script: the build's CommonJS bundle of it with everything it boots with, quickjs-wasi
 * and the prelude's exact text included (scripts/bundle-worker.mjs: one file, and no ES module loader
 * in the new thread). The script itself when running from source (tests), and when profiling (see
 * workerExecArgv), so a profile still names each module.
 */
const WORKER_URL =
  process.env.CODECELL_WORKER_CPU_PROF_DIR === undefined && existsSync(fileURLToPath(WORKER_BUNDLE_URL))
    ? WORKER_BUNDLE_URL
    : WORKER_SCRIPT_URL;
/** Random bytes sent with each `init` (see workerEntropy): 4 a VM, so a thousand VMs. */
const WORKER_ENTROPY_BYTES = 4096;
/** node:crypto, loaded when the first `init` is sent, not with this module (see prelude-bytecode.ts). */
let crypto: typeof import("node:crypto") | undefined;

/**
 * Random bytes for a worker's QuickJS VMs (the `entropy` of its `init`). QuickJS's libc takes 4 bytes
 * through WASI's `random_get` as each VM is made; in the worker that meant Node's Web Crypto, whose first
 * use loads its modules into the fresh thread, on the way to the first cell. The host has node:crypto
 * loaded by then (the prelude's hashes), so filling these there loads nothing.
 */
export function workerEntropy(): Uint8Array {
  crypto ??= createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");
  return crypto.randomFillSync(new Uint8Array(WORKER_ENTROPY_BYTES));
}

/** The worker started as this module loads is stopped if no pool has taken it by then. */
const EARLY_WORKER_UNCLAIMED_MS = 10_000;

/**
 * Diagnostics only: with CODECELL_WORKER_CPU_PROF_DIR set, every worker writes a V8 CPU profile there
 * when it exits (the gateway's `bench:profile` reads them). Nothing else of the host's flags is passed.
 */
function workerExecArgv(): string[] {
  const profileDir = process.env.CODECELL_WORKER_CPU_PROF_DIR;
  return profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, "--cpu-prof-interval=100"] : [];
}

/**
 * node:worker_threads, loaded with the first worker, not with this module: a process that imports the
 * sandbox with its early start off and runs no cell (the CLI's `catalog`, `check`) never needs it.
 */
let workerThreads: typeof import("node:worker_threads") | undefined;

function spawnWorker(): Worker {
  workerThreads ??= createRequire(import.meta.url)(
    "node:worker_threads",
  ) as typeof import("node:worker_threads");
  // A clean execArgv: the worker resolves packages to their built files whatever flags the host runs
  // with (a test runner's source conditions would point it at TypeScript it cannot load).
  return new workerThreads.Worker(WORKER_URL, { execArgv: workerExecArgv() });
}

type EarlyWorker = { worker: Worker; timer: NodeJS.Timeout; drop: () => void; ignore: () => void };
let early: EarlyWorker | null = null;

/**
 * Start compiling the default `quickjs.wasm` and booting one worker thread now, while the host is still
 * loading the rest of its modules (the engine's import), so the first cell does not wait for a thread
 * to start, its modules to load, its first VM or the prelude's compilation: the worker gets the module
 * as soon as it is compiled (with no snapshot secret; the pool that takes it sends its own `init`).
 * It is unref'd and stopped after EARLY_WORKER_UNCLAIMED_MS if no pool takes it.
 * `CODECELL_SANDBOX_EARLY_START=0` turns this off (for a process that imports the sandbox without
 * running cells).
 */
function startEarly(): void {
  if (process.env.CODECELL_SANDBOX_EARLY_START === "0") return;
  // The thread first: its boot is the longest way to the first cell, while reading and compiling the
  // wasm (begun right after) is done long before the worker can take it.
  let spawned: Worker | null = null;
  try {
    spawned = spawnWorker();
  } catch {
    // No early worker; the wasm still starts compiling for the pool.
  }
  const module = loadQuickJsModule();
  // Marked handled: a pool awaits the same promise (loadQuickJsModule keeps one per path) and turns its
  // failure into runtime_unavailable; a process that never makes a pool needs no word of it.
  module.catch(() => {});
  if (spawned === null) return;
  const worker = spawned;
  // Until a pool takes it, a crash or exit only means there is no early worker to take.
  const drop = () => {
    if (early?.worker !== worker) return;
    clearTimeout(early.timer);
    early = null;
  };
  // Its `ready` (or `init-failed`) before a pool takes it is for no one: the pool's own init gets the
  // same answer again.
  const ignore = () => {};
  worker.on("error", drop);
  worker.on("exit", drop);
  worker.on("message", ignore);
  // Only now: adding a "message" listener refs the worker's port again, and a process that imports the
  // sandbox without running a cell must still exit at once, not when the unclaimed timer fires.
  worker.unref();
  const timer = setTimeout(() => {
    drop();
    void worker.terminate();
  }, EARLY_WORKER_UNCLAIMED_MS);
  timer.unref();
  early = { worker, timer, drop, ignore };
  module.then(
    (compiled) => {
      if (early?.worker === worker)
        worker.postMessage({
          type: "init",
          module: compiled,
          snapshotSecret: null,
          prelude: preludeFor(compiled),
          entropy: workerEntropy(),
        });
    },
    () => {},
  );
}

/**
 * A new sandbox worker thread: the one started early when there is one and the pool uses the default
 * `quickjs.wasm` (the module it may already have been sent), else a fresh one. The caller sends `init`
 * either way.
 */
export function startSandboxWorker(defaultWasm: boolean): Worker {
  if (defaultWasm && early !== null) {
    const { worker, timer, drop, ignore } = early;
    early = null;
    clearTimeout(timer);
    worker.off("error", drop);
    worker.off("exit", drop);
    worker.off("message", ignore);
    return worker;
  }
  return spawnWorker();
}

/** Whether the worker started as this package loaded is still waiting for a pool (tests). */
export function earlyWorkerWaiting(): boolean {
  return early !== null;
}

startEarly();
