// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file is the run's table of calls on the host: at most `maxPendingToolCalls` running, the rest
// queued in order; each call's cancellation; and where outcomes go, to the driving segment's sink or,
// while the run is suspended, to the snapshot store. It outlives segments.

import { RequestTable } from "@codecell/bridge";
import type { SettleOutcome } from "@codecell/sandbox";
import type { SnapshotStore } from "@codecell/snapshot-store";
import { CallCancellation } from "./call-cancellation.js";

/**
 * One call on the host, from the cell's request to its outcome: its cancellation, its place in the
 * run's in-flight table and, in a subclass, how it runs. One object per call carries all of it (a loop
 * of quick calls made a record, a start closure, a finish closure and a cancellation per call before).
 */
export abstract class InflightCall extends CallCancellation {
  /** Whoever keeps books on the call (the exec or wait segment that made it); handed back to the sink. */
  owner: unknown = undefined;
  /** When the call started running (epoch ms); for a queued call, when the cell made it. */
  startedAtMs = 0;
  /** Waiting for one of the run's `maxPendingToolCalls` slots. */
  queued = false;
  outcome: SettleOutcome | undefined = undefined;
  /** Handed out of the host (see NestedToolCall.handOut): its outcome comes through the store. */
  handedOut = false;
  #table: InflightCalls | null = null;
  #ended = false;

  constructor(
    readonly requestId: string,
    readonly toolId: string,
  ) {
    super();
  }

  /**
   * Runs the call on the host. It ends with `finish(outcome)`, synchronously when the executor
   * answered at once (no promise is made for it), or later; a throw counts as a failure.
   */
  protected abstract run(): void;

  /** Ends the call, once: a run that settles and then throws, or a thenable that answers twice, counts once. */
  protected finish(outcome: SettleOutcome): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#table?.ended(this, outcome);
  }

  /** The table lets go of a handed-out call: whatever the executor answers later is not delivered. */
  letGo(): void {
    this.#ended = true;
    this.#table = null;
  }

  /** Called by the table when a slot is free for it. */
  startIn(table: InflightCalls): void {
    this.#table = table;
    try {
      this.run();
    } catch (error) {
      this.finish({
        ok: false,
        error: {
          name: "Error",
          message: `Tool ${this.toolId} could not be started: ${error instanceof Error ? error.message : String(error)}`,
          code: "nested_tool_failed",
        },
      });
    }
  }
}

/** Where outcomes go while a segment drives the run: the call's id, its outcome and its record. */
export type OutcomeSink = (requestId: string, outcome: SettleOutcome, call: Readonly<InflightCall>) => void;

/**
 * The nested calls of one code-mode run that are still running or queued on the host. At most
 * `maxRunning` run at once (the spec's `maxPendingToolCalls`); the rest wait in the order the cell
 * made them and start as slots free up. They outlive the exec (or wait) that made them: while the run
 * is suspended the queue keeps draining and outcomes go to the snapshot store, and while a segment
 * drives the VM they go straight to it.
 */
export class InflightCalls {
  readonly #calls = new RequestTable<InflightCall>();
  readonly #queue: InflightCall[] = [];
  #queueHead = 0;
  #running = 0;
  /** A call that settles while the queue is being pumped frees its slot for that same pump. */
  #pumping = false;
  #sink: OutcomeSink | null = null;
  #stored: { store: SnapshotStore; runId: string; forget: () => void } | null = null;
  /** Told when the last started call ends (see `stopped`). */
  #onIdle: Array<() => void> = [];

  constructor(
    readonly sessionId: string,
    readonly maxRunning: number,
  ) {}

  get size(): number {
    return this.#calls.size;
  }

  /** Calls running on the host right now (never more than `maxRunning`). */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting for a slot. */
  get queued(): number {
    return this.#queue.length - this.#queueHead;
  }

  /**
   * Runs the call now if a slot is free, else queues it; a call cancelled while queued never starts.
   * Its outcome goes to the sink (synchronously when the executor answered at once) with `owner`, or
   * to the store while the run is suspended.
   */
  add(call: InflightCall, owner: unknown): void {
    // The common case, a free slot and nobody ahead: no trip through the queue.
    const now = !this.#pumping && this.#running < this.maxRunning && this.#queueHead === this.#queue.length;
    call.owner = owner;
    call.startedAtMs = Date.now();
    call.queued = !now;
    this.#calls.set(call.requestId, call);
    if (now) {
      this.#run(call);
      return;
    }
    this.#queue.push(call);
    this.#pump();
  }

  #pump(): void {
    // Re-entered when a call settles synchronously inside #run: the loop below sees the freed slot.
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#running < this.maxRunning && this.#queueHead < this.#queue.length) {
        const next = this.#queue[this.#queueHead]!;
        this.#queue[this.#queueHead] = undefined as never;
        this.#queueHead++;
        this.#run(next);
      }
    } finally {
      this.#pumping = false;
    }
    // Drop the consumed head now and then, so a long run's queue does not keep every entry.
    if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
      this.#queue.splice(0, this.#queueHead);
      this.#queueHead = 0;
    }
  }

  #run(call: InflightCall): void {
    if (call.aborted) {
      const reason = call.reason?.message ?? "the run ended";
      this.#settled(call, {
        ok: false,
        error: {
          name: "Error",
          message: `Tool ${call.toolId} was cancelled before it started: ${reason}`,
          code: "aborted",
        },
      });
      return;
    }
    if (call.queued) {
      call.queued = false;
      call.startedAtMs = Date.now();
    }
    this.#running++;
    call.startIn(this);
  }

  /** A started call ended (InflightCall.finish, once per call): its slot is free. */
  ended(call: InflightCall, outcome: SettleOutcome): void {
    this.#left();
    this.#settled(call, outcome);
    this.#pump();
  }

  /** A running call let go of its slot. */
  #left(): void {
    this.#running--;
    if (this.#running === 0 && this.#onIdle.length > 0) {
      for (const wake of this.#onIdle.splice(0)) wake();
    }
  }

  /**
   * Resolves once no call is running on the host any more, or after `graceMs`. A run that ends
   * (completed, failed, aborted) cancels its calls, but a call already inside its tool (a file being
   * written, a request on the wire) ends only when the tool returns: waiting for that here means an
   * answer that says the run ended is not followed by effects of its calls. The grace bounds an
   * executor that ignores its signal.
   */
  stopped(graceMs: number): Promise<void> {
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, graceMs);
      timer.unref?.();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#onIdle.push(done);
    });
  }

  #settled(call: InflightCall, settled: SettleOutcome): void {
    call.outcome = settled;
    const { requestId } = call;
    // A call dropped by abortAll has no one left to tell.
    if (this.#calls.get(requestId) !== call) return;
    if (this.#sink) {
      this.#calls.delete(requestId);
      this.#sink(requestId, settled, call);
    } else if (this.#stored) {
      this.#record(requestId, settled);
    }
  }

  /**
   * Hands a settled call's outcome to the store and lets go of it once the store has it. When the run is
   * gone (finished on another replica, expired, aborted), nothing will read the rest either: they are
   * cancelled and the table lets go of the run. If the store cannot be reached, the outcome stays here
   * for a resume in this process, and is offered to the store again (a shared store's `wait` may come to
   * another replica, which learns of it only from the store) until the run could no longer be resumed.
   */
  #record(requestId: string, outcome: SettleOutcome, attempt = 0, since = Date.now()): void {
    const stored = this.#stored;
    if (!stored) return;
    stored.store.settleCall(stored.runId, requestId, outcome as never).then(
      (answer) => {
        // A segment of this process drives the run again (or it ended here): it owns the table now.
        if (this.#stored !== stored || this.#sink) return;
        if (answer === "run_gone") {
          this.abortAll("The code-mode run ended.");
          stored.forget();
          return;
        }
        this.#calls.delete(requestId);
        if (this.#calls.size === 0) {
          this.#stored = null;
          stored.forget();
        }
      },
      () => {
        const { store } = stored;
        if (store.closed || Date.now() - since > store.snapshotTtlSeconds * 1000) return;
        const retry = setTimeout(
          () => {
            if (this.#stored === stored && !this.#sink && this.#calls.get(requestId)?.outcome === outcome)
              this.#record(requestId, outcome, attempt + 1, since);
          },
          Math.min(250 * 2 ** attempt, 2_000),
        );
        retry.unref();
      },
    );
  }

  get(requestId: string): Readonly<InflightCall> | undefined {
    return this.#calls.get(requestId);
  }

  /** A live segment takes outcomes from now on (it also gets those that settled while detached). */
  attach(sink: OutcomeSink): void {
    this.#sink = sink;
  }

  detach(): void {
    this.#sink = null;
  }

  /**
   * Outcomes that arrive from now on are recorded in the store under this run; `forget` is called when
   * no call is left here (the owner's table drops this run then, so a run resumed and finished by
   * another replica, or one that expired, leaves nothing behind in this process).
   */
  storedAs(store: SnapshotStore, runId: string, forget: () => void): void {
    this.#stored = { store, runId, forget };
    if (this.#calls.size === 0) {
      this.#stored = null;
      forget();
      return;
    }
    // Calls that settled between the snapshot and the store write.
    for (const [requestId, call] of this.#calls.entries()) {
      if (call.outcome) this.#record(requestId, call.outcome);
    }
  }

  /**
   * Lets go of the calls handed out of the host (see NestedToolCall.handOut) once the run is stored:
   * their outcomes reach the store from outside, so nothing here waits for them, and their slots free.
   */
  releaseHandedOut(): void {
    const handedOut: InflightCall[] = [];
    for (const call of this.#calls.values()) {
      if (call.handedOut && call.outcome === undefined) handedOut.push(call);
    }
    if (handedOut.length === 0) return;
    for (const call of handedOut) {
      this.#calls.delete(call.requestId);
      call.letGo();
      this.#left();
    }
    this.#pump();
  }

  /** Removes and returns a settled call's outcome, if it has one. */
  take(requestId: string): SettleOutcome | undefined {
    const call = this.#calls.get(requestId);
    if (!call?.outcome) return undefined;
    this.#calls.delete(requestId);
    return call.outcome;
  }

  /** Cancels the calls `owner` made that have not settled (an exec or wait segment that was aborted). */
  abortOwnedBy(owner: unknown, reason: string): void {
    for (const call of this.#calls.values()) {
      if (call.owner === owner && call.outcome === undefined) call.abort(new Error(reason));
    }
  }

  abortAll(reason: string): void {
    for (const call of this.#calls.values()) call.abort(new Error(reason));
    this.#calls.clear();
    // Queued calls never start: each settles as cancelled for whoever still awaits it.
    this.#pumpAborted();
    this.#sink = null;
    this.#stored = null;
  }

  #pumpAborted(): void {
    while (this.#queueHead < this.#queue.length) {
      const next = this.#queue[this.#queueHead]!;
      this.#queue[this.#queueHead] = undefined as never;
      this.#queueHead++;
      this.#run(next);
    }
    this.#queue.length = 0;
    this.#queueHead = 0;
  }
}
