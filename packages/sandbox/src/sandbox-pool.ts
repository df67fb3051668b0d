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
import { prepareCell } from "@codecell/transpile";
import { RunHandle, type RunHost, type RunSettings } from "./sandbox-run.js";
import type { RestoreOptions, RunOptions, SandboxPool, SandboxPoolOptions, SandboxRun } from "./types.js";
import { type CompiledModule, loadQuickJsModule } from "./wasm-module.js";

const WORKER_URL = new URL("./worker/sandbox-worker.js", import.meta.url);
const DEFAULT_MAX_BRIDGE_VALUE_BYTES = 8 * 1024 * 1024;
const DEFAULT_WATCHDOG_GRACE_MS = 100;

/** One warm worker thread and the runs it hosts. */
class WorkerSlot implements RunHost {
  readonly worker: Worker;
  readonly runs = new Map<string, RunHandle>();
  readonly ready: Promise<void>;
  alive = true;
  private readonly pool: Pool;

  constructor(pool: Pool, module: Promise<CompiledModule>, snapshotSecret: string | null) {
    this.pool = pool;
    // A clean execArgv: the worker resolves packages to their built files whatever flags the host runs
    // with (a test runner's source conditions would point it at TypeScript it cannot load).
    this.worker = new Worker(WORKER_URL, { execArgv: [] });
    this.worker.unref();
    let markReady: () => void = () => {};
    let markFailed: (error: Error) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      markFailed = reject;
    });
    this.ready.catch(() => {});
    this.worker.on("message", (raw: unknown) => {
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
        if (item.type === "ready") markReady();
        else if (item.type === "init-failed") markFailed(new Error(item.message));
        else if (item.type !== "batch") this.runs.get(item.runId)?.receive(item);
      }
    });
    this.worker.on("error", (error) => {
      markFailed(error);
      this.pool.replace(this, null, "internal_error", `the sandbox worker crashed (${error.message})`);
    });
    this.worker.on("exit", (code) => {
      markFailed(new Error(`worker exited with code ${code}`));
      if (this.alive)
        this.pool.replace(this, null, "internal_error", `the sandbox worker exited (code ${code})`);
    });
    module.then(
      (compiled) =>
        this.worker.postMessage({
          type: "init",
          module: compiled,
          snapshotSecret,
        } satisfies HostToWorkerMessage),
      (error: Error) => markFailed(error),
    );
  }

  post(message: HostToWorkerMessage, transfer?: ArrayBuffer[]): void {
    if (this.alive) this.worker.postMessage(message, transfer ?? []);
  }

  adopt(run: RunHandle): void {
    this.runs.set(run.runId, run);
    // A worker with live runs keeps the process alive; an idle pool does not.
    if (this.runs.size === 1) this.worker.ref();
  }

  detach(run: RunHandle): void {
    if (this.runs.get(run.runId) === run) this.runs.delete(run.runId);
    if (this.runs.size === 0 && this.alive) this.worker.unref();
  }

  unresponsive(run: RunHandle, code: CodeModeErrorCode): void {
    const message =
      code === "aborted"
        ? "The run was aborted and its worker did not stop in time; the worker was replaced."
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
  private closed = false;
  private replaced = 0;

  constructor(options: SandboxPoolOptions) {
    const size = Math.max(1, Math.floor(options.size ?? availableParallelism()));
    this.snapshotSecret = options.snapshotSecret ?? null;
    this.maxBridgeValueBytes = options.maxBridgeValueBytes ?? DEFAULT_MAX_BRIDGE_VALUE_BYTES;
    this.watchdogGraceMs = options.watchdogGraceMs ?? DEFAULT_WATCHDOG_GRACE_MS;
    this.module = loadQuickJsModule(options.wasm);
    this.module.catch(() => {});
    for (let index = 0; index < size; index++)
      this.slots.push(new WorkerSlot(this, this.module, this.snapshotSecret));
  }

  run(options: RunOptions): SandboxRun {
    const run = this.createRun(options, false);
    void this.launch(run, async () => {
      const code = await prepareCell(options.code, options.language);
      return {
        type: "start",
        runId: run.runId,
        code,
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
        await slot.worker.terminate();
      }),
    );
  }

  /** Terminate a worker, fail the runs it hosted, and start a fresh one in its place. */
  replace(slot: WorkerSlot, culprit: RunHandle | null, code: CodeModeErrorCode, message: string): void {
    if (!slot.alive) return;
    slot.alive = false;
    this.replaced += 1;
    void slot.worker.terminate();
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
      this.slots[index] = new WorkerSlot(this, this.module, this.snapshotSecret);
  }

  private createRun(options: RunOptions | RestoreOptions, restored: boolean): RunHandle {
    const settings: RunSettings = {
      runId: randomUUID(),
      limits: options.limits,
      deadlineAt: options.deadlineAt,
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
    try {
      await this.launchRun(run, firstMessage);
    } finally {
      clearInterval(keepAlive);
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

  /** The ready worker with the fewest runs; waits for one to be ready. */
  private async pickSlot(): Promise<WorkerSlot> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const candidates = this.slots.filter((slot) => slot.alive);
      if (candidates.length === 0) throw new Error("no sandbox worker is available");
      candidates.sort((a, b) => a.runs.size - b.runs.size);
      const best = candidates[0] as WorkerSlot;
      try {
        await best.ready;
        if (best.alive) return best;
      } catch (error) {
        if (attempt === 2) throw error;
      }
    }
    throw new Error("no sandbox worker became ready");
  }
}

/** Start a pool of warm QuickJS-WASI workers sharing one compiled module. */
export function createSandboxPool(options: SandboxPoolOptions = {}): SandboxPool {
  return new Pool(options);
}
