import { randomUUID } from "node:crypto";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import {
  type HostToWorkerMessage,
  type ProtocolError,
  parseWorkerToHostMessage,
  type WorkerToHostMessage,
} from "@codecell/bridge";
import { CodeModeError, type CodeModeErrorCode } from "@codecell/contract/errors";
import { RunHandle, type RunHost, type RunSettings } from "./sandbox-run.js";
import type { RestoreOptions, RunOptions, SandboxPool, SandboxPoolOptions, SandboxRun } from "./types.js";
import { type CompiledModule, loadQuickJsModule } from "./wasm-module.js";

const WORKER_URL = new URL("./worker/sandbox-worker.js", import.meta.url);
const DEFAULT_MAX_BRIDGE_VALUE_BYTES = 8 * 1024 * 1024;
const DEFAULT_WATCHDOG_GRACE_MS = 100;
const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;

/**
 * Diagnostics only: with CODECELL_WORKER_CPU_PROF_DIR set, every worker writes a V8 CPU profile there
 * when it exits (the gateway's `bench:profile` reads them). Nothing else of the host's flags is passed.
 */
function workerExecArgv(): string[] {
  const profileDir = process.env.CODECELL_WORKER_CPU_PROF_DIR;
  return profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, "--cpu-prof-interval=100"] : [];
}

/** One warm worker thread and the runs it hosts. */
class WorkerSlot implements RunHost {
  /** Null until spawned: every worker but a pool's first waits for the first to be ready. */
  private worker: Worker | null = null;
  readonly runs = new Map<string, RunHandle>();
  readonly ready: Promise<void>;
  isReady = false;
  alive = true;
  private readonly pool: Pool;
  private markReady: () => void = () => {};
  private markFailed: (error: Error) => void = () => {};

  constructor(
    pool: Pool,
    module: Promise<CompiledModule>,
    snapshotSecret: string | null,
    after: Promise<unknown> | null,
  ) {
    this.pool = pool;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = () => {
        this.isReady = true;
        resolve();
      };
      this.markFailed = reject;
    });
    this.ready.catch(() => {});
    if (after === null) this.spawn(module, snapshotSecret);
    else void after.then(() => this.spawn(module, snapshotSecret));
  }

  private spawn(module: Promise<CompiledModule>, snapshotSecret: string | null): void {
    if (!this.alive) return;
    // A clean execArgv: the worker resolves packages to their built files whatever flags the host runs
    // with (a test runner's source conditions would point it at TypeScript it cannot load).
    const worker = new Worker(WORKER_URL, { execArgv: workerExecArgv() });
    this.worker = worker;
    if (this.runs.size === 0) worker.unref();
    worker.on("message", (raw: unknown) => {
      let message: WorkerToHostMessage;
      try {
        message = parseWorkerToHostMessage(raw);
      } catch (error) {
        this.pool.replace(
          this,
          null,
          "internal_error",
          `a sandbox worker broke the protocol: ${(error as ProtocolError).message}`,
        );
        return;
      }
      for (const item of message.type === "batch" ? message.messages : [message]) {
        if (item.type === "ready") this.markReady();
        else if (item.type === "init-failed") this.markFailed(new Error(item.message));
        else if (item.type !== "batch") this.runs.get(item.runId)?.receive(item);
      }
    });
    // A message the host cannot read (values are depth-bounded in the worker, so this is a bug or a
    // broken channel) belongs to no known run: the worker's state can no longer be trusted.
    worker.on("messageerror", (error) => {
      this.pool.replace(
        this,
        null,
        "internal_error",
        `a message from the sandbox worker could not be read (${error.message})`,
      );
    });
    worker.on("error", (error) => {
      this.markFailed(error);
      this.pool.replace(this, null, "internal_error", `the sandbox worker crashed (${error.message})`);
    });
    worker.on("exit", (code) => {
      this.markFailed(new Error(`worker exited with code ${code}`));
      if (this.alive)
        this.pool.replace(this, null, "internal_error", `the sandbox worker exited (code ${code})`);
    });
    module.then(
      (compiled) => this.post({ type: "init", module: compiled, snapshotSecret }),
      (error: Error) => this.markFailed(error),
    );
  }

  /** Stop the worker (if it was ever spawned); a slot that never spawned never will. */
  async terminate(): Promise<void> {
    this.alive = false;
    this.markFailed(new Error("the sandbox worker was stopped"));
    await this.worker?.terminate();
  }

  post(message: HostToWorkerMessage, transfer?: ArrayBuffer[]): void {
    if (!this.alive || this.worker === null) return;
    this.worker.postMessage(message, transfer ?? []);
  }

  adopt(run: RunHandle): void {
    this.runs.set(run.runId, run);
    // A worker with live runs keeps the process alive; an idle pool does not.
    if (this.runs.size === 1) this.worker?.ref();
  }

  detach(run: RunHandle): void {
    if (this.runs.get(run.runId) === run) this.runs.delete(run.runId);
    if (this.runs.size === 0 && this.alive) this.worker?.unref();
    if (this.runs.size === 0) this.pool.workerIdle();
  }

  unresponsive(run: RunHandle, code: CodeModeErrorCode): void {
    const message =
      code === "aborted"
        ? "The run was aborted and its worker did not stop in time; the worker was replaced."
        : code === "runtime_unavailable"
          ? "The sandbox worker did not get the cell's VM ready within the start-up bound (startupTimeoutMs); the worker was replaced and nothing of the cell ran. Try again."
          : "The cell ran past its deadline inside code the interrupt cannot reach (a long built-in call); the worker was terminated and replaced.";
    this.pool.replace(this, run, code, message);
  }
}

class Pool implements SandboxPool {
  private readonly module: Promise<CompiledModule>;
  private readonly slots: WorkerSlot[] = [];
  private readonly snapshotSecret: string | null;
  private readonly maxBridgeValueBytes: number;
  private readonly watchdogGraceMs: number;
  private readonly startupTimeoutMs: number;
  private closed = false;
  private replaced = 0;
  private startRest: () => void = () => {};
  /** Runs between launch and adoption by a worker. */
  private launching = 0;

  constructor(options: SandboxPoolOptions) {
    const size = Math.max(1, Math.floor(options.size ?? availableParallelism()));
    this.snapshotSecret = options.snapshotSecret ?? null;
    this.maxBridgeValueBytes = options.maxBridgeValueBytes ?? DEFAULT_MAX_BRIDGE_VALUE_BYTES;
    this.watchdogGraceMs = options.watchdogGraceMs ?? DEFAULT_WATCHDOG_GRACE_MS;
    this.startupTimeoutMs = options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS;
    this.module = loadQuickJsModule(options.wasm);
    this.module.catch(() => {});
    // One worker starts at once. The rest start when it has failed, when it is ready with nothing to
    // do, when its first run is over, or when a second run is waiting: booting them (tens of ms of CPU
    // each) while the first cell runs would slow that cell down on a small machine.
    const first = new WorkerSlot(this, this.module, this.snapshotSecret, null);
    this.slots.push(first);
    const rest = new Promise<void>((resolve) => {
      // After the current turn: a run that just ended gets its result to its caller first.
      this.startRest = () => setImmediate(resolve);
    });
    first.ready.then(
      () => setImmediate(() => this.workerIdle()),
      () => this.startRest(),
    );
    for (let index = 1; index < size; index++)
      this.slots.push(new WorkerSlot(this, this.module, this.snapshotSecret, rest));
  }

  run(options: RunOptions): SandboxRun {
    const run = this.createRun(options, false);
    // The worker checks and transpiles the cell: a multi-megabyte cell costs its worker, never the
    // host's event loop.
    void this.launch(run, async () => {
      if (typeof options.code !== "string") {
        throw new CodeModeError(
          "invalid_input",
          `A cell must be a string of code; received ${typeof options.code}.`,
        );
      }
      return {
        type: "start",
        runId: run.runId,
        code: options.code,
        language: options.language,
        surface: JSON.stringify(options.surface),
        limits: options.limits,
        deadlineAt: run.deadline,
        signal: run.abortFlag,
      };
    });
    return run;
  }

  restore(options: RestoreOptions): SandboxRun {
    const run = this.createRun(options, true);
    void this.launch(run, async () => {
      if (!(options.snapshot instanceof Uint8Array)) {
        throw new CodeModeError(
          "snapshot_restore_failed",
          "The snapshot must be the Uint8Array that suspend() returned.",
        );
      }
      return {
        type: "restore",
        runId: run.runId,
        snapshot: options.snapshot,
        limits: options.limits,
        deadlineAt: run.deadline,
        signal: run.abortFlag,
      };
    });
    return run;
  }

  stats() {
    let liveRuns = 0;
    for (const slot of this.slots) liveRuns += slot.runs.size;
    return { workers: this.slots.length, liveRuns, workersReplaced: this.replaced };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const slots = this.slots.splice(0);
    await Promise.all(
      slots.map(async (slot) => {
        slot.alive = false;
        for (const run of [...slot.runs.values()]) run.fail("aborted", "The sandbox pool was closed.");
        await slot.terminate();
      }),
    );
  }

  /** A worker has no runs (or has just become ready): the workers not yet started may start now. */
  workerIdle(): void {
    if (this.launching === 0 && this.stats().liveRuns === 0) this.startRest();
  }

  /** Terminate a worker, fail the runs it hosted, and start a fresh one in its place. */
  replace(slot: WorkerSlot, culprit: RunHandle | null, code: CodeModeErrorCode, message: string): void {
    if (!slot.alive) return;
    slot.alive = false;
    this.replaced += 1;
    void slot.terminate();
    for (const run of [...slot.runs.values()]) {
      if (run === culprit) run.fail(code, message);
      else
        run.fail(
          "internal_error",
          culprit === null
            ? `The sandbox worker hosting this run was lost: ${message}.`
            : "The sandbox worker hosting this run was replaced because another run on it stopped responding.",
        );
    }
    slot.runs.clear();
    const index = this.slots.indexOf(slot);
    if (index !== -1 && !this.closed)
      this.slots[index] = new WorkerSlot(this, this.module, this.snapshotSecret, null);
  }

  private createRun(options: RunOptions | RestoreOptions, restored: boolean): RunHandle {
    const timed = (value: unknown) => typeof value === "number" && Number.isFinite(value);
    if (!timed(options.deadlineAt) && !timed(options.timeoutMs)) {
      throw new CodeModeError(
        "invalid_input",
        "A sandbox run needs deadlineAt or timeoutMs (a finite number).",
      );
    }
    const settings: RunSettings = {
      runId: randomUUID(),
      limits: options.limits,
      deadlineAt: options.deadlineAt,
      timeoutMs: options.timeoutMs,
      startupTimeoutMs: this.startupTimeoutMs,
      signal: options.signal,
      onRequest: options.onRequest,
      maxBridgeValueBytes: this.maxBridgeValueBytes,
      watchdogGraceMs: this.watchdogGraceMs,
      restored,
    };
    return new RunHandle(settings);
  }

  private async launch(run: RunHandle, firstMessage: () => Promise<HostToWorkerMessage>): Promise<void> {
    // Workers are unref'd while idle; until the run is adopted, this keeps the process waiting for it.
    const keepAlive = setInterval(() => {}, 60_000);
    // Start-up has its own bound, apart from the cell's timeout: a run no worker takes in time fails.
    const startup = setTimeout(() => {
      if (run.attached) return;
      run.fail(
        "runtime_unavailable",
        `No sandbox worker could take the cell within ${this.startupTimeoutMs} ms (workers still starting or all busy on an overloaded machine); nothing of the cell ran. Try again.`,
      );
    }, this.startupTimeoutMs);
    this.launching += 1;
    if (this.launching > 1 || this.stats().liveRuns > 0) this.startRest();
    try {
      await this.launchRun(run, firstMessage);
    } finally {
      clearTimeout(startup);
      clearInterval(keepAlive);
      this.launching -= 1;
      this.workerIdle();
    }
  }

  private async launchRun(run: RunHandle, firstMessage: () => Promise<HostToWorkerMessage>): Promise<void> {
    if (this.closed) return run.fail("runtime_unavailable", "The sandbox pool is closed.");
    if (run.aborted) return run.fail("aborted", "The run was aborted before it started.");
    let message: HostToWorkerMessage;
    try {
      message = await firstMessage();
    } catch (error) {
      if (CodeModeError.is(error)) return run.fail(error.code, error.message);
      return run.fail("internal_error", `The cell could not be prepared: ${(error as Error).message}`);
    }
    let slot: WorkerSlot;
    try {
      await this.module;
      slot = await this.pickSlot();
    } catch (error) {
      return run.fail(
        "runtime_unavailable",
        `The QuickJS-WASI runtime could not be loaded (${(error as Error).message}); code mode cannot run cells until it is fixed.`,
      );
    }
    if (run.ended) return;
    slot.adopt(run);
    run.attach(slot, message, message.type === "restore" ? [] : undefined);
  }

  /** The ready worker with the fewest runs; when none is ready yet, the first one to become ready. */
  private async pickSlot(): Promise<WorkerSlot> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const candidates = this.slots.filter((slot) => slot.alive);
      if (candidates.length === 0) throw new Error("no sandbox worker is available");
      let best: WorkerSlot | null = null;
      for (const slot of candidates) {
        if (slot.isReady && (best === null || slot.runs.size < best.runs.size)) best = slot;
      }
      if (best !== null) return best;
      try {
        await Promise.any(candidates.map((slot) => slot.ready));
      } catch (error) {
        if (attempt === 2) throw (error as AggregateError).errors?.[0] ?? error;
      }
    }
    throw new Error("no sandbox worker became ready");
  }
}

/** Start a pool of warm QuickJS-WASI workers sharing one compiled module. */
export function createSandboxPool(options: SandboxPoolOptions = {}): SandboxPool {
  return new Pool(options);
}
