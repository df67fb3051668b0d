// The pool's host side in one file, past ~600 lines: `Pool` (placement, growth, retiring and replacing
// workers) and `WorkerSlot` (one sandbox thread, its port, the shared channel and the host's spin for a
// quick answer) call into each other's state both ways (a slot reports to the pool's replace, maySpin,
// workerIdle and counters; the pool reads every slot's runs and readiness).
import { randomUUID } from "node:crypto";
import { availableParallelism } from "node:os";
import type { Worker } from "node:worker_threads";
import {
  countsOnPort,
  createSharedChannelBuffer,
  type HostToWorkerMessage,
  type ProtocolError,
  parseWorkerToHostMessage,
  SHARED_SLOT_BYTES,
  SharedChannel,
  type WorkerToHostMessage,
} from "@codecell/bridge";
import { CodeModeError, type CodeModeErrorCode } from "@codecell/contract/errors";
import { RunHandle, type RunHost, type RunSettings } from "./sandbox-run.js";
import type { RestoreOptions, RunOptions, SandboxPool, SandboxPoolOptions, SandboxRun } from "./types.js";
import { type CompiledModule, loadQuickJsModule, preludeFor } from "./wasm-module.js";
import { startSandboxWorker, workerEntropy } from "./worker-start.js";

const DEFAULT_MAX_BRIDGE_VALUE_BYTES = 8 * 1024 * 1024;
const DEFAULT_WATCHDOG_GRACE_MS = 100;
/** A worker busy this long on one command is held by a long or spinning cell: the last choice. */
const BLOCKED_AFTER_MS = 50;
/** An extra worker (beyond `size`) with no runs this long is stopped. */
const EXTRA_WORKER_IDLE_MS = 10_000;
/** While the pool grows, how often a waiting run looks again at the workers it could take. */
const GROWTH_POLL_MS = 5;
const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;
/**
 * After it sends a worker a result, the host spins this long for the worker's answer (the next request
 * of a loop of quick calls) in the shared channel, instead of returning to its event loop and being
 * woken by a message event. A spin that ends empty makes the host skip its next 1, 3, 7 ... 63 spins
 * for that worker (see WorkerSlot.awaitQuickAnswer).
 */
const HOST_SPIN_MS = 0.1;
/**
 * The most time one turn of the host's event loop spends in a run of spins and the calls they serve
 * synchronously: past it, answers come through the port again until the loop has turned once, so
 * timers and other clients' I/O run at least this often (see Pool.maySpin).
 */
const HOST_SYNC_SERVE_MS = 2;

/**
 * Spins (bounded by HOST_SPIN_MS) until the worker's answer is in the shared channel: whether it is.
 *
 * A function of its own, apart from the handling of the answer: V8 optimizes a function once it has run
 * enough bytecode, and a spin runs its loop hundreds of times per call. Inside awaitQuickAnswer the loop
 * had the whole answer path (parse, receive, the engine's request handler) optimized during the first
 * cell, before most of its branches had run, and each branch reached later threw that code away. For the
 * same reason it only polls: taking the answer, or giving up on it, is the caller's (its first optimized
 * code came before either had run, and was thrown away at each: 2-3 compiles of this loop per process).
 */
function spinForAnswer(channel: SharedChannel): boolean {
  const postedBefore = channel.peerPostedCount();
  const until = performance.now() + HOST_SPIN_MS;
  for (;;) {
    if (channel.full()) return true;
    // The worker posted on the port meanwhile: its answer will follow that message there.
    if (performance.now() >= until || channel.peerPostedCount() !== postedBefore) return false;
  }
}

/** One warm worker thread and the runs it hosts. */
class WorkerSlot implements RunHost {
  /** Set at construction; a slot is created exactly when its worker should start. */
  private worker: Worker | null = null;
  readonly runs = new Map<string, RunHandle>();
  readonly ready: Promise<void>;
  /**
   * Rung after every message posted to the worker: a worker waiting synchronously for a quick host
   * result wakes on it and reads the message off its port at once (see the worker's serveWaitingRuns).
   */
  private readonly doorbell = new Int32Array(new SharedArrayBuffer(4));
  /** Quick settles down, and the worker's answers up, while the other side spins (@codecell/bridge). */
  private readonly channelBuffer = createSharedChannelBuffer();
  private readonly channel = new SharedChannel(this.channelBuffer, "host");
  /** Consecutive spins that ended without an answer, and spins still to skip because of them. */
  private spinMisses = 0;
  private spinsToSkip = 0;
  isReady = false;
  /** Its start failed (init-failed, crash): it will never be ready. */
  startFailed = false;
  alive = true;
  private readonly pool: Pool;
  private markReady: () => void = () => {};
  private markFailed: (error: Error) => void = () => {};

  constructor(pool: Pool, module: Promise<CompiledModule>, snapshotSecret: string | null) {
    this.pool = pool;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = () => {
        this.isReady = true;
        resolve();
      };
      this.markFailed = (error) => {
        if (!this.isReady) this.startFailed = true;
        reject(error);
      };
    });
    // Marked handled: a failed start is read through startFailed and the pool's replace, and awaited by
    // pickSlot where it matters; a slot nobody waited for must not end the process.
    this.ready.catch(() => {});
    this.spawn(module, snapshotSecret);
  }

  private spawn(module: Promise<CompiledModule>, snapshotSecret: string | null): void {
    if (!this.alive) return;
    const worker = startSandboxWorker(this.pool.defaultWasm);
    this.worker = worker;
    worker.on("message", (raw: unknown) => {
      // Counted, so the worker knows when the port is empty of its messages (it uses the shared
      // channel only then).
      if (countsOnPort((raw as { type?: unknown } | null)?.type)) this.channel.noteTaken();
      this.receive(raw);
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
      (compiled) =>
        this.post({
          type: "init",
          module: compiled,
          snapshotSecret,
          doorbell: this.doorbell,
          channel: this.channelBuffer,
          prelude: preludeFor(compiled),
          entropy: workerEntropy(),
        }),
      (error: Error) => this.markFailed(error),
    );
    // After the listeners: adding a "message" listener refs a worker's port again, so an idle pool
    // unref'd before it would keep its host's process alive until closed.
    if (this.runs.size === 0) worker.unref();
  }

  /** A message from the worker, through the port or the shared channel: checked the same way. */
  private receive(raw: unknown): void {
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
    if (message.type !== "batch") this.take(message);
    else for (const item of message.messages) this.take(item);
  }

  /** One message from the worker (a quick call's is never a batch: no array is made for it). */
  private take(message: WorkerToHostMessage): void {
    if (message.type === "ready") this.markReady();
    else if (message.type === "init-failed") this.markFailed(new Error(message.message));
    else if (message.type !== "batch") this.runs.get(message.runId)?.receive(message);
  }

  /** Stop the worker (if it was ever spawned); a slot that never spawned never will. */
  async terminate(): Promise<void> {
    this.alive = false;
    this.markFailed(new Error("the sandbox worker was stopped"));
    await this.worker?.terminate();
  }

  post(message: HostToWorkerMessage, transfer?: ArrayBuffer[], awaitsAnswer = false): void {
    if (!this.alive || this.worker === null) return;
    const settle = message.type === "settle";
    // The host spins for the answer only when its run has nothing else pending (see RunHost.post) and
    // the worker is waiting for this settle in serveWaitingRuns (it then answers within microseconds;
    // one back in its event loop takes longer to wake than a spin lasts). Listening starts before the
    // settle leaves, so a worker that answers at once finds the host there.
    const spinning = awaitsAnswer && settle && this.channel.peerListening() && this.startListening();
    // A settle goes through the shared channel when the worker is waiting for it in serveWaitingRuns
    // and it fits (a large result is not encoded for the slot only to be refused there).
    if (
      !settle ||
      !this.channel.canSend() ||
      !fitsSlot(message) ||
      !this.channel.send(JSON.stringify(message))
    ) {
      if (countsOnPort(message.type)) this.channel.notePosted();
      if (transfer === undefined) this.worker.postMessage(message);
      else this.worker.postMessage(message, transfer);
    }
    // After the message is in place, so a worker woken by the bell finds it.
    Atomics.add(this.doorbell, 0, 1);
    Atomics.notify(this.doorbell, 0);
    if (spinning) this.awaitQuickAnswer();
  }

  /** Whether to spin for the answer to the settle being sent (and if so, the slot now listens). */
  private startListening(): boolean {
    if (this.spinsToSkip > 0) {
      this.spinsToSkip -= 1;
      return false;
    }
    // A message of the worker's is on its way through the port: the answer follows it there.
    if (!this.channel.caughtUp() || !this.pool.maySpin(performance.now())) return false;
    this.channel.listen();
    return true;
  }

  /**
   * The worker usually answers a settle within tens of microseconds (the guest's next call): spin for
   * that answer in the shared channel, bounded by HOST_SPIN_MS and the pool's per-turn budget, and
   * handle it here, at once. If it does not come in time the host stops listening and the answer comes
   * through the port as before; the exchange on the slot decides which, so it comes exactly once.
   */
  private awaitQuickAnswer(): void {
    // Not there in time: stop listening. An answer the worker handed over just before is returned by
    // stopListening and handled here; otherwise it comes through the port.
    const text = spinForAnswer(this.channel) ? this.channel.take(false) : this.channel.stopListening();
    if (text === null) {
      this.pool.spinsEmpty += 1;
      this.spinMisses = Math.min(this.spinMisses + 1, 6);
      this.spinsToSkip = (1 << this.spinMisses) - 1;
      return;
    }
    this.spinMisses = 0;
    this.pool.answersCaught += 1;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      this.pool.replace(
        this,
        null,
        "internal_error",
        `a sandbox worker broke the protocol: its shared-channel message is not JSON (${(error as Error).message})`,
      );
      return;
    }
    this.receive(raw);
  }

  adopt(run: RunHandle): void {
    this.runs.set(run.runId, run);
    // A worker with live runs keeps the process alive; an idle pool does not.
    if (this.runs.size === 1) this.worker?.ref();
  }

  /** How long this worker has been running one command for one of its runs (0 when it is free). */
  blockedFor(now: number): number {
    let longest = 0;
    for (const run of this.runs.values()) longest = Math.max(longest, run.busyFor(now));
    return longest;
  }

  /** Whether a cell of `owner` is running on this worker right now. */
  busyWith(owner: string, now: number): boolean {
    for (const run of this.runs.values()) {
      if (run.owner === owner && run.busyFor(now) > 0) return true;
    }
    return false;
  }

  detach(run: RunHandle): void {
    if (this.runs.get(run.runId) === run) this.runs.delete(run.runId);
    if (this.runs.size === 0 && this.alive) this.worker?.unref();
    if (this.runs.size === 0) this.pool.workerIdle(this);
    this.pool.runReleased();
  }

  unresponsive(run: RunHandle, code: CodeModeErrorCode): void {
    const message =
      code === "aborted"
        ? "The run was aborted and its worker did not stop in time; the worker was replaced."
        : code === "runtime_unavailable"
          ? "The sandbox worker did not get the cell's VM ready within the start-up bound (startupTimeoutMs); the worker was replaced and nothing of the cell ran. Try again."
          : // The watchdog only knows the worker did not answer in time: a built-in the interrupt cannot reach
            // and a machine too busy to schedule the worker look the same from here, so say both.
            `The cell ran past its deadline and its worker did not answer within watchdogGraceMs (${this.pool.watchdogGrace} ms) after it: a long built-in call the interrupt cannot reach, or a machine too busy to run the worker in time. The worker was terminated and replaced.`;
    this.pool.replace(this, run, code, message);
  }
}

class Pool implements SandboxPool {
  private readonly module: Promise<CompiledModule>;
  /** The pool runs the default quickjs.wasm: it may take the worker started as this package loaded. */
  readonly defaultWasm: boolean;
  private readonly slots: WorkerSlot[] = [];
  private readonly snapshotSecret: string | null;
  private readonly maxBridgeValueBytes: number;
  private readonly watchdogGraceMs: number;
  /** The watchdog's grace, for a message that names it. */
  get watchdogGrace(): number {
    return this.watchdogGraceMs;
  }
  private readonly startupTimeoutMs: number;
  private closed = false;
  private replaced = 0;
  /** Warm workers the pool grows to under concurrent runs (and keeps), and its cap while workers are held. */
  private readonly baseSize: number;
  private readonly maxWorkers: number;
  private readonly retireTimers = new Map<WorkerSlot, NodeJS.Timeout>();
  private readonly releaseWaiters: (() => void)[] = [];
  /** Spins for a worker's answer that caught it, and that ended without it (stats). */
  answersCaught = 0;
  spinsEmpty = 0;
  /**
   * When this turn of the event loop started spinning for workers' answers (-Infinity: it has not). A
   * double, like the times it holds, so the field never changes representation (see DOUBLE_ZERO).
   */
  private spinTurnStartedAt = Number.NEGATIVE_INFINITY;
  private readonly turnEnded = () => {
    this.spinTurnStartedAt = Number.NEGATIVE_INFINITY;
  };

  constructor(options: SandboxPoolOptions) {
    refuseRemovedThreadOption(options);
    const size = Math.max(1, Math.floor(options.size ?? availableParallelism()));
    this.baseSize = size;
    this.maxWorkers = Math.max(size, Math.floor(options.maxWorkers ?? size + 2));
    this.snapshotSecret = options.snapshotSecret ?? null;
    this.maxBridgeValueBytes = options.maxBridgeValueBytes ?? DEFAULT_MAX_BRIDGE_VALUE_BYTES;
    this.watchdogGraceMs = options.watchdogGraceMs ?? DEFAULT_WATCHDOG_GRACE_MS;
    this.startupTimeoutMs = options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS;
    this.defaultWasm = options.wasm === undefined;
    this.module = loadQuickJsModule(options.wasm);
    // Marked handled: every run awaits it in launchRun and fails runtime_unavailable with its message.
    this.module.catch(() => {});
    // One worker starts at once; the pool grows toward `size` only when a run has to wait for a busy
    // worker (see pickSlot). A process that runs one cell at a time keeps one worker and one set of
    // VMs, and no second worker boots beside a running cell on a small machine.
    this.slots.push(new WorkerSlot(this, this.module, this.snapshotSecret));
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
    let busyWorkers = 0;
    for (const slot of this.slots) {
      liveRuns += slot.runs.size;
      if (slot.runs.size > 0) busyWorkers++;
    }
    return {
      workers: this.slots.length,
      /** Workers with at least one cell on them (the rest are idle, or still starting). */
      busyWorkers,
      liveRuns,
      workersReplaced: this.replaced,
      answersCaught: this.answersCaught,
      spinsEmpty: this.spinsEmpty,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.retireTimers.values()) clearTimeout(timer);
    this.retireTimers.clear();
    const slots = this.slots.splice(0);
    await Promise.all(
      slots.map(async (slot) => {
        slot.alive = false;
        for (const run of [...slot.runs.values()]) run.fail("aborted", "The sandbox pool was closed.");
        await slot.terminate();
      }),
    );
  }

  /**
   * Whether a worker slot may spin for an answer now: yes until HOST_SYNC_SERVE_MS have passed since the
   * first spin of this turn of the event loop (an immediate marks the turn's end), so a run making a
   * long loop of quick calls yields to the loop at least that often.
   */
  maySpin(now: number): boolean {
    if (this.spinTurnStartedAt < 0) {
      this.spinTurnStartedAt = now;
      setImmediate(this.turnEnded);
      return true;
    }
    return now - this.spinTurnStartedAt < HOST_SYNC_SERVE_MS;
  }

  /** A worker has no runs: an extra one (beyond `size`) retires if it stays that way. */
  workerIdle(slot: WorkerSlot): void {
    this.scheduleRetire(slot);
  }

  /** A run left its worker: runs waiting while the pool grows look again. */
  runReleased(): void {
    for (const waiter of this.releaseWaiters.splice(0)) waiter();
  }

  /**
   * A run is about to wait behind a busy worker: start one more worker, up to `size`, unless one is
   * already starting (workers boot one at a time; each costs tens of ms of CPU and a V8 heap).
   */
  private growForWaitingRun(): void {
    if (this.closed) return;
    const alive = this.slots.filter((slot) => slot.alive);
    if (alive.length >= this.baseSize || alive.some((slot) => !slot.isReady && !slot.startFailed)) return;
    this.slots.push(new WorkerSlot(this, this.module, this.snapshotSecret));
  }

  /** An extra worker that stays without runs for a while is stopped; the pool shrinks back to size. */
  private scheduleRetire(slot: WorkerSlot): void {
    if (this.closed || this.slots.indexOf(slot) < this.baseSize || this.retireTimers.has(slot)) return;
    const timer = setTimeout(() => {
      this.retireTimers.delete(slot);
      const index = this.slots.indexOf(slot);
      if (index < this.baseSize || slot.runs.size > 0 || this.closed) return;
      this.slots.splice(index, 1);
      slot.alive = false;
      void slot.terminate();
    }, EXTRA_WORKER_IDLE_MS);
    timer.unref();
    this.retireTimers.set(slot, timer);
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
      this.slots[index] = new WorkerSlot(this, this.module, this.snapshotSecret);
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
      owner: typeof options.owner === "string" ? options.owner : null,
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
    try {
      await this.launchRun(run, firstMessage);
    } finally {
      clearTimeout(startup);
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
      slot = await this.pickSlot(run);
    } catch (error) {
      return run.fail(
        "runtime_unavailable",
        `The QuickJS-WASI runtime could not be loaded (${(error as Error).message}); code mode cannot run cells until it is fixed.`,
      );
    }
    if (run.ended) {
      slot.detach(run);
      return;
    }
    run.attach(slot, message, message.type === "restore" ? [] : undefined);
  }

  /**
   * Where a run goes: a ready worker with nothing running; else one busy only briefly; else (every
   * worker held by a cell running BLOCKED_AFTER_MS or more) a worker still starting or a new one,
   * up to maxWorkers. An owner whose cells already keep half of maxWorkers busy gets its next run
   * queued behind its own cells, so one session never holds every worker and other sessions keep
   * getting answers while its cells spin.
   */
  /** Runs waiting for the same worker resume together: each takes its place at once (synchronously
   * with the decision), so the next one sees that worker busy. */
  private place(run: RunHandle, slot: WorkerSlot): WorkerSlot {
    run.placed();
    slot.adopt(run);
    return slot;
  }

  private async pickSlot(run: RunHandle): Promise<WorkerSlot> {
    const owner = run.owner;
    let failedStarts = 0;
    for (;;) {
      if (run.ended) throw new Error("the run ended before a worker took it");
      const candidates = this.slots.filter((slot) => slot.alive);
      if (candidates.length === 0) throw new Error("no sandbox worker is available");
      const now = performance.now();
      const ready = candidates.filter((slot) => slot.isReady);
      if (owner !== null) {
        const own = ready.filter((slot) => slot.busyWith(owner, now));
        if (own.length >= Math.max(1, Math.floor(this.maxWorkers / 2)))
          return this.place(run, fewestRuns(own));
      }
      const idle = ready.filter((slot) => slot.blockedFor(now) === 0);
      if (idle.length > 0) return this.place(run, fewestRuns(idle));
      // Busy for a moment only: a quick command ends sooner than a worker starts, so the run queues
      // there, unless the pool is still growing toward `size`: then it takes whichever comes first,
      // the busy worker freeing or the new one being ready. (Queued behind a cell that turns out to
      // spin, it would wait for that cell's deadline.)
      const brief = ready.filter((slot) => slot.blockedFor(now) < BLOCKED_AFTER_MS);
      if (brief.length > 0) {
        this.growForWaitingRun();
        const growing = this.slots.filter((slot) => slot.alive && !slot.isReady && !slot.startFailed);
        if (growing.length === 0 || this.slots.length > this.baseSize)
          return this.place(run, fewestRuns(brief));
        await this.somethingChanged(growing);
        continue;
      }
      // Every ready worker is held by a long cell: wait for one starting, or start one.
      const starting = candidates.filter((slot) => !slot.isReady);
      if (starting.length === 0 && candidates.length < this.maxWorkers && !this.closed) {
        const extra = new WorkerSlot(this, this.module, this.snapshotSecret);
        this.slots.push(extra);
        starting.push(extra);
      }
      if (starting.length === 0) return this.place(run, leastBlocked(ready, now));
      try {
        await Promise.any(starting.map((slot) => slot.ready));
      } catch (error) {
        if (ready.length > 0) return this.place(run, leastBlocked(ready, now));
        if (++failedStarts >= 3) throw (error as AggregateError).errors?.[0] ?? error;
      }
    }
  }

  /**
   * Resolves when a starting worker is ready (or failed), a run leaves its worker, or after a short
   * poll (a run waiting on the host frees its worker without leaving it).
   */
  private somethingChanged(starting: WorkerSlot[]): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, GROWTH_POLL_MS);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.releaseWaiters.push(done);
      for (const slot of starting) slot.ready.then(done, done);
    });
  }
}

/**
 * Cells always run on worker threads. A host written for the removed `thread` option gets told so,
 * rather than having the option silently ignored; `thread: "worker"` was the default and still means it.
 */
function refuseRemovedThreadOption(options: SandboxPoolOptions): void {
  const thread = (options as { thread?: unknown }).thread;
  if (thread === undefined || thread === "worker") return;
  throw new CodeModeError(
    "invalid_input",
    `The sandbox option thread was removed: cells always run on worker threads. Drop thread: ${JSON.stringify(thread)} from the options.`,
  );
}

/** Whether a settle's results are short enough to try the shared channel's slot (UTF-16 units). */
function fitsSlot(message: HostToWorkerMessage & { type: "settle" }): boolean {
  let chars = 128;
  // Each item's keys, quotes and flags: `{"requestId":"","ok":false,"json":"","shallow":false}`.
  for (const item of message.items) chars += item.json.length + item.requestId.length + 64;
  return chars < SHARED_SLOT_BYTES;
}

/** At maxWorkers with every worker busy: one that is not held by a long cell, with the fewest runs. */
function leastBlocked(slots: WorkerSlot[], now: number): WorkerSlot {
  const short = slots.filter((slot) => slot.blockedFor(now) < BLOCKED_AFTER_MS);
  return fewestRuns(short.length > 0 ? short : slots);
}

function fewestRuns(slots: WorkerSlot[]): WorkerSlot {
  let best = slots[0] as WorkerSlot;
  for (const slot of slots) if (slot.runs.size < best.runs.size) best = slot;
  return best;
}

/** Start a pool of warm QuickJS-WASI workers sharing one compiled module. */
export function createSandboxPool(options: SandboxPoolOptions = {}): SandboxPool {
  return new Pool(options);
}
