import {
  type HostRequest,
  type HostToWorkerMessage,
  RequestTable,
  type SettleItem,
  toErrorData,
  toJsonText,
  type WorkerToHostMessage,
} from "@codecell/bridge";
import { DOUBLE_ZERO, emptyReferenceArray, keepShapes } from "@codecell/bridge/v8-shapes";
import { CodeModeError, type CodeModeErrorCode } from "@codecell/contract/errors";
import type { SandboxEvent, SandboxLimits, SandboxRun, SettleOutcome, SuspendedRun } from "./types.js";

const resolved = Promise.resolve();

// One executor for every waiting next(): it hands the promise's resolve over synchronously, so a
// call of a loop of awaited host calls costs no closure of its own here.
let capturedResolve: (event: SandboxEvent) => void = () => {};
function captureResolve(resolve: (event: SandboxEvent) => void): void {
  capturedResolve = resolve;
}

/** What a run needs from the worker that hosts it. */
export interface RunHost {
  /**
   * `awaitsAnswer`: the run has nothing else pending, so nothing happens until the worker answers (the
   * guest's next call): the host may spin for that answer (see WorkerSlot.awaitQuickAnswer).
   */
  post(message: HostToWorkerMessage, transfer?: ArrayBuffer[], awaitsAnswer?: boolean): void;
  /** The run stopped answering past its deadline: terminate the worker. */
  unresponsive(run: RunHandle, code: CodeModeErrorCode): void;
  detach(run: RunHandle): void;
}

type RunState = "starting" | "live" | "suspending" | "ended";

export type RunSettings = {
  runId: string;
  /** For fairness between owners (sessions) when the pool places runs on workers. */
  owner: string | null;
  limits: SandboxLimits;
  /** Absolute deadline, or none when `timeoutMs` sets it at attach. */
  deadlineAt: number | undefined;
  timeoutMs: number | undefined;
  /** With `timeoutMs`: how long a worker may take to get the VM ready before it counts as stuck. */
  startupTimeoutMs: number;
  signal: AbortSignal | undefined;
  onRequest: (request: HostRequest) => void;
  maxBridgeValueBytes: number;
  watchdogGraceMs: number;
  /** A restored run learns its pending calls from the worker's first idle event. */
  restored: boolean;
};

/** The host side of one run: the event queue, the pending-call ledger, batching and the watchdog. */
export class RunHandle implements SandboxRun {
  readonly runId: string;
  /** Shared with the worker: index 0 is the abort flag its interrupt handler reads. */
  readonly abortFlag = new Int32Array(new SharedArrayBuffer(4));
  private readonly settings: RunSettings;
  private deadlineAt: number;
  private host: RunHost | null = null;
  private state: RunState = "starting";
  // Reference arrays from the start: next() pushes into them for every nested call (see emptyReferenceArray).
  private readonly events: SandboxEvent[] = emptyReferenceArray();
  private readonly waiters: Array<(event: SandboxEvent) => void> = emptyReferenceArray();
  private terminal: SandboxEvent | null = null;
  /**
   * The requests the caller has not settled, by id, as the worker announced them (request messages, and
   * a restored run's first idle): the idle event lists them, so idle messages need not repeat them.
   */
  private readonly pending = new RequestTable<HostRequest>();
  /** Results settled this tick, not yet sent (null when none: a lone result's array is made to size). */
  private settleQueue: SettleItem[] | null = null;
  private flushScheduled = false;
  private readonly flushSettlesLater = () => this.flushSettles();
  /** Commands sent to the worker that it has not answered yet; while > 0 guest code may be running. */
  private commandsInFlight = 0;
  /** When the worker started on this run's oldest unanswered command (performance.now()). */
  private busySince = DOUBLE_ZERO;
  private seeded = false;
  /** The worker is still getting the VM ready (runs given `timeoutMs`): the watchdog allows start-up. */
  private settingUp = false;
  /** Ended by a successful suspend: results belong to the restored run. */
  private suspended = false;
  private watchdog: NodeJS.Timeout | null = null;
  private watchdogDueAt = DOUBLE_ZERO;
  private suspendWaiter: { resolve(run: SuspendedRun): void; reject(error: Error): void } | null = null;
  /**
   * The caller's signal has aborted (read by the watchdog, armed for every command). Node 20 gives every
   * AbortSignal a hidden class (map) of its own, so reading `signal.aborted` there met a new map in each
   * run and threw the optimized code of the nested-call path away; the listener keeps this field instead.
   */
  private signalAborted: boolean;
  private readonly onAbort = () => {
    this.signalAborted = true;
    this.abort();
  };

  constructor(settings: RunSettings) {
    this.settings = settings;
    this.runId = settings.runId;
    this.deadlineAt = settings.deadlineAt ?? Number.POSITIVE_INFINITY;
    this.signalAborted = settings.signal?.aborted === true;
    settings.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  get owner(): string | null {
    return this.settings.owner;
  }

  /** How long the worker has been busy with this run's commands without answering (0 when idle). */
  busyFor(now: number): number {
    // Placed on a worker but not sent yet: its start is on the way, so the worker counts as busy.
    if (this.state === "starting") return Math.max(0.001, now - this.busySince);
    return this.commandsInFlight > 0 && this.state !== "ended" ? now - this.busySince : 0;
  }

  /** Placed on a worker (its start follows at once). */
  placed(): void {
    this.busySince = performance.now();
  }

  get limits(): SandboxLimits {
    return this.settings.limits;
  }

  get deadline(): number {
    return this.deadlineAt;
  }

  /** A worker has taken the run (its first command is sent). */
  get attached(): boolean {
    return this.host !== null;
  }

  get ended(): boolean {
    return this.state === "ended";
  }

  get aborted(): boolean {
    return this.signalAborted;
  }

  /** Bind to a worker and send the first command (start or restore). */
  attach(host: RunHost, first: HostToWorkerMessage, transfer?: ArrayBuffer[]): void {
    if (this.state !== "starting") return;
    this.host = host;
    this.state = "live";
    const { timeoutMs, startupTimeoutMs } = this.settings;
    if (timeoutMs !== undefined && (first.type === "start" || first.type === "restore")) {
      // Getting the VM ready is the runtime's time, bounded on its own; the cell's clock starts when
      // the worker reports "started" (or, for a restore, its first idle).
      this.settingUp = true;
      this.deadlineAt = Date.now() + startupTimeoutMs + timeoutMs;
      first.deadlineAt = this.deadlineAt;
      if (first.type === "start") first.timeoutMs = timeoutMs;
    }
    this.send(first, transfer);
  }

  next(): Promise<SandboxEvent> {
    const queued = this.events.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.terminal !== null) return Promise.resolve(this.terminal);
    const promise = new Promise<SandboxEvent>(captureResolve);
    this.waiters.push(capturedResolve);
    return promise;
  }

  settle(requestId: string, outcome: SettleOutcome): void {
    // A run that ended (failed, completed, disposed) needs no more results: its terminal event already
    // says why, and a caller still delivering must not be handed a misleading error of its own.
    if (this.state === "ended" && !this.suspended) return;
    if (this.state === "ended" || this.state === "suspending") {
      throw new CodeModeError(
        "invalid_input",
        `Run ${this.runId} is ${this.state === "ended" ? "suspended" : "being suspended"}; results for it must go to the restored run.`,
      );
    }
    if (!this.pending.delete(requestId)) {
      throw new CodeModeError(
        "invalid_input",
        `Request ${JSON.stringify(requestId)} is not pending in run ${this.runId}: it was never issued or is already settled.`,
        { requestId },
      );
    }
    let item: SettleItem;
    if (outcome.ok) {
      try {
        const { text, shallow } = toJsonText(outcome.value, {
          maxBytes: this.settings.maxBridgeValueBytes,
          label: "tool result",
          errorCode: "nested_tool_failed",
        });
        // Shallow text (plain data the host already walked) spares the worker its depth scan.
        item = { requestId, ok: true, json: text, shallow };
      } catch (error) {
        item = { requestId, ok: false, json: JSON.stringify(toErrorData(error)), shallow: false };
      }
    } else {
      item = { requestId, ok: false, json: JSON.stringify(toErrorData(outcome.error)), shallow: false };
    }
    if (this.settleQueue === null) this.settleQueue = [item];
    else this.settleQueue.push(item);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // Results settled in the same tick travel together and cost one drain in the worker. A promise
      // reaction is the cheapest microtask (queueMicrotask makes an async resource and a bound
      // function each time: about twice the time and bytes).
      resolved.then(this.flushSettlesLater);
    }
  }

  private flushSettles(): void {
    this.flushScheduled = false;
    const items = this.settleQueue;
    if (items === null || this.state !== "live") return;
    this.settleQueue = null;
    // With calls still pending (a Promise.all of slow tools) the answer is only "still waiting": the host
    // has other work to do (the other calls' results), not an answer to spin for.
    this.send(
      { type: "settle", runId: this.runId, items, deadlineAt: this.deadlineAt },
      undefined,
      this.pending.size === 0,
    );
  }

  suspend(): Promise<SuspendedRun> {
    const terminal = this.terminal;
    if (terminal?.type === "failed" && !this.suspended) {
      // The run failed meanwhile (its worker was lost, the watchdog stopped it): say that, not "busy".
      return Promise.reject(new CodeModeError(terminal.code ?? "internal_error", terminal.message));
    }
    if (
      this.state !== "live" ||
      this.commandsInFlight > 0 ||
      this.settleQueue !== null ||
      this.pending.size === 0
    ) {
      return Promise.reject(
        new CodeModeError(
          "invalid_input",
          `Run ${this.runId} can only be suspended while idle with host calls pending (after an idle event, before settling).`,
        ),
      );
    }
    this.state = "suspending";
    return new Promise((resolve, reject) => {
      this.suspendWaiter = { resolve, reject };
      this.host?.post({ type: "suspend", runId: this.runId });
    });
  }

  setDeadline(deadlineAt: number): void {
    this.deadlineAt = deadlineAt;
    if (this.commandsInFlight > 0) this.armWatchdog();
  }

  dispose(): void {
    if (this.state === "ended") return;
    this.host?.post({ type: "dispose", runId: this.runId });
    this.end({ type: "failed", code: "aborted", message: "The run was disposed by its caller.", output: [] });
  }

  /** Fail the run from the host side (before start, worker lost, watchdog). */
  fail(code: CodeModeErrorCode, message: string): void {
    if (this.state === "ended") return;
    this.suspendWaiter?.reject(new CodeModeError(code, message));
    this.suspendWaiter = null;
    this.end({ type: "failed", code, message, output: [] });
  }

  private abort(): void {
    Atomics.store(this.abortFlag, 0, 1);
    if (this.state === "ended") return;
    // Not started by its worker yet (the VM is being made ready, or the start waits behind another
    // run's cell on a held worker): the worker sees the flag when it gets there. Stopping the worker
    // for it would fail the run it is busy with.
    if (this.state === "starting" || this.commandsInFlight === 0 || this.settingUp) {
      // Nothing is running: free the VM now rather than waiting for a drain that may never come.
      this.host?.post({ type: "dispose", runId: this.runId });
      this.fail("aborted", "The run was aborted by its caller.");
      return;
    }
    // Guest code is running: its interrupt handler sees the flag; the watchdog covers a stuck worker.
    this.armWatchdog(Date.now());
  }

  private send(message: HostToWorkerMessage, transfer?: ArrayBuffer[], awaitsAnswer = false): void {
    if (this.commandsInFlight === 0) this.busySince = performance.now();
    this.commandsInFlight += 1;
    this.armWatchdog();
    this.host?.post(message, transfer, awaitsAnswer);
  }

  private armWatchdog(from = this.deadlineAt): void {
    const now = Date.now();
    const target = this.aborted ? now : this.settingUp ? now + this.settings.startupTimeoutMs : from;
    const dueAt = Math.max(now, target) + this.settings.watchdogGraceMs;
    // The timer armed for an earlier command of this run is still right: every quick host call would
    // otherwise clear and set a timer.
    if (this.watchdog !== null && this.watchdogDueAt === dueAt) return;
    if (this.watchdog !== null) clearTimeout(this.watchdog);
    this.watchdogDueAt = dueAt;
    this.watchdog = setTimeout(() => {
      this.watchdog = null;
      // It fires at its time even when the worker answered meanwhile; only an unanswered command counts.
      if (this.state === "ended" || this.commandsInFlight === 0) return;
      this.host?.unresponsive(
        this,
        this.aborted ? "aborted" : this.settingUp ? "runtime_unavailable" : "timeout",
      );
    }, dueAt - now);
    // The watchdog guards a run; it must not keep a process alive on its own.
    this.watchdog.unref();
  }

  private clearWatchdog(): void {
    if (this.watchdog !== null) clearTimeout(this.watchdog);
    this.watchdog = null;
  }

  /** A message from the worker for this run. */
  receive(message: WorkerToHostMessage): void {
    if (this.state === "ended") return;
    if (message.type === "idle") this.receiveIdle(message);
    else this.receiveOther(message);
  }

  /**
   * An idle: the message of every quick call (its requests ride in it). A method of its own, small enough
   * for V8 to inline into its callers: inside the whole switch (793 bytes of bytecode) it was optimized
   * only after eight uninterrupted rounds of its interrupt budget, which the bench's other cells never
   * left it (each cell's new message shapes restart the count).
   */
  private receiveIdle(message: Extract<WorkerToHostMessage, { type: "idle" }>): void {
    // The requests of the drain this idle ends, as if each had come in its own message first.
    for (const request of message.requests ?? []) {
      this.takeRequest(request);
      // Its caller may end the run from inside onRequest (dispose, a failed settle).
      if (this.ended) return;
    }
    if (this.settingUp && this.settings.timeoutMs !== undefined) {
      this.startClock(Date.now() + this.settings.timeoutMs);
    }
    this.answered();
    if (this.settings.restored && !this.seeded) {
      this.seeded = true;
      for (const request of message.pending) this.pending.set(request.requestId, request);
    }
    // Calls settled here whose results are still on their way to the worker are not pending for
    // the caller any more: the caller's view is this ledger, not the worker's.
    this.push({ type: "idle", pending: this.pending.values(), output: message.output });
  }

  /** Every message of the worker's but an idle. */
  private receiveOther(message: Exclude<WorkerToHostMessage, { type: "idle" }>): void {
    switch (message.type) {
      case "started": {
        this.startClock(message.deadlineAt);
        return;
      }
      case "request": {
        this.takeRequest(message.request);
        return;
      }
      case "completed": {
        this.answered();
        this.end({ type: "completed", value: message.value, output: message.output });
        return;
      }
      case "failed": {
        this.answered();
        const event: SandboxEvent = { type: "failed", message: message.message, output: message.output };
        if (message.code !== null) event.code = message.code;
        if (message.error !== null) event.error = message.error;
        this.end(event);
        return;
      }
      case "suspended": {
        this.suspended = true;
        const waiter = this.suspendWaiter;
        this.suspendWaiter = null;
        this.end(
          {
            type: "failed",
            code: "internal_error",
            message: "The run was suspended; continue it with restore().",
            output: [],
          },
          false,
        );
        waiter?.resolve({
          snapshot: message.snapshot,
          bytes: message.snapshot.byteLength,
          pending: message.pending,
        });
        return;
      }
      case "suspend-failed": {
        this.state = "live";
        const waiter = this.suspendWaiter;
        this.suspendWaiter = null;
        waiter?.reject(new CodeModeError(message.code, message.message));
        return;
      }
    }
  }

  /** A request the worker issued: pending until the caller settles it. */
  private takeRequest(request: HostRequest): void {
    this.pending.set(request.requestId, request);
    try {
      this.settings.onRequest(request);
    } catch (error) {
      this.settle(request.requestId, { ok: false, error: toErrorData(error) });
    }
  }

  /** The cell's own clock starts (the VM is ready): the deadline and the watchdog follow it. */
  private startClock(deadlineAt: number): void {
    this.settingUp = false;
    this.deadlineAt = deadlineAt;
    if (this.commandsInFlight > 0) this.armWatchdog();
  }

  private answered(): void {
    // The watchdog stays armed while the run is idle: the next command (usually a settle a few
    // microseconds later) reuses it, and it does nothing if it fires with no command unanswered.
    this.commandsInFlight = Math.max(0, this.commandsInFlight - 1);
    if (this.commandsInFlight > 0) this.busySince = performance.now();
  }

  private push(event: SandboxEvent): void {
    const waiter = this.waiters.shift();
    if (waiter !== undefined) waiter(event);
    else this.events.push(event);
  }

  private end(event: SandboxEvent, deliver = true): void {
    if (this.state === "ended") return;
    this.state = "ended";
    this.clearWatchdog();
    this.settings.signal?.removeEventListener("abort", this.onAbort);
    this.terminal = event;
    this.host?.detach(this);
    if (deliver) this.push(event);
    // Anyone still waiting gets the terminal event.
    for (const waiter of this.waiters.splice(0)) waiter(event);
  }
}

// One run handle kept for the process's life, so that the class's map survives the garbage collections
// between cells and the code that reads run handles stays optimized (see keepShapes of @codecell/bridge).
keepShapes(
  new RunHandle({
    runId: "",
    owner: null,
    limits: { memoryLimitBytes: 0, maxOutputBytes: 0, maxPendingToolCalls: 0, maxSnapshotBytes: 0 },
    deadlineAt: undefined,
    timeoutMs: 0,
    startupTimeoutMs: 0,
    signal: undefined,
    onRequest: () => {},
    maxBridgeValueBytes: 0,
    watchdogGraceMs: 0,
    restored: false,
  }),
);
