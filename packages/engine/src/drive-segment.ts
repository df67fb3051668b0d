// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file is the driver: it runs the VM of one segment, delivers the outcomes that are ready to it,
// and waits when nothing is ready, until the cell completes, fails or must wait (pending calls past the
// deadline, a handed-out call, a yield). How it ended (`SegmentEnd`) goes to suspend-segment.

import type { HostRequest } from "@codecell/bridge";
import { DOUBLE_ZERO, emptyReferenceArray, keepShapes } from "@codecell/bridge/v8-shapes";
import {
  CodeModeError,
  type CodeModeErrorCode,
  type CodeModeOutput,
  isCodeModeErrorCode,
  type JsonValue,
} from "@codecell/contract";
import type { SandboxRun, SettleOutcome } from "@codecell/sandbox";

/** How one exec or wait call left the VM. */
export type SegmentEnd =
  | { type: "completed"; value: JsonValue; output: CodeModeOutput[] }
  | { type: "failed"; code?: CodeModeErrorCode; message: string; output: CodeModeOutput[] }
  | {
      type: "waiting";
      reason: "pending_tools" | "yield";
      snapshot: Uint8Array;
      pending: HostRequest[];
      output: CodeModeOutput[];
    };

/**
 * The abort of the exec or wait segment a driver serves. `aborted` is a plain field its owner sets just
 * before it aborts `signal`, so it always reads as `signal.aborted` does. The driver checks it for every
 * event of a loop of nested calls, and on Node 20 every AbortSignal has a hidden class (map) of its own:
 * reading `signal.aborted` there met a new map in each exec and threw the optimized code away.
 */
export interface SegmentAbort {
  readonly signal: AbortSignal;
  readonly aborted: boolean;
  /**
   * True once a nested call of the segment was handed out of the host (NestedToolCall.handOut): the
   * driver suspends the run as soon as nothing is ready for it, instead of at the deadline.
   */
  readonly handedOut: boolean;
}

/**
 * Results ready to go into the VM; the driver alone settles them, so it always knows when it is idle.
 * A segment's waits share one deadline timer and one abort listener (a loop of quick host calls waits
 * once per call, and a timer plus a listener each time cost more than the call); `close()` drops them.
 */
export class ReadyQueue {
  // The items in order, in three parallel arrays that are reused: a loop of quick calls passes one
  // item per call through here, and an array (or a tuple) per item or per drain is garbage each time.
  // Reference arrays from the start (see emptyReferenceArray): each exec has a queue of its own.
  readonly #ids: string[] = emptyReferenceArray();
  readonly #outcomes: SettleOutcome[] = emptyReferenceArray();
  readonly #toolIds: Array<string | undefined> = emptyReferenceArray();
  #count = 0;
  #wake: (() => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  // A deadline (Date.now() + ms): a double from the start (see DOUBLE_ZERO).
  #timerDueAt = DOUBLE_ZERO;
  #signal: AbortSignal | null = null;
  readonly #fire = () => {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  };
  readonly #onDeadline = () => {
    this.#timer = null;
    this.#fire();
  };

  /** `toolId` names a nested call's tool, so an outcome left here at suspension is stored with it. */
  push(requestId: string, outcome: SettleOutcome, toolId?: string): void {
    const index = this.#count++;
    this.#ids[index] = requestId;
    this.#outcomes[index] = outcome;
    this.#toolIds[index] = toolId;
    this.#fire();
  }

  /** Wakes a driver waiting for an item (something other than an item changed: a call was handed out). */
  wake(): void {
    this.#fire();
  }

  /** Takes every item out, in order. */
  drain(): Array<[string, SettleOutcome, string?]> {
    const items: Array<[string, SettleOutcome, string?]> = [];
    for (let index = 0; index < this.#count; index++) {
      items.push([this.#ids[index]!, this.#outcomes[index]!, this.#toolIds[index]]);
    }
    this.#clear();
    return items;
  }

  /**
   * Settles every item in the run, in order, and empties the queue; whether any was taken. An id the
   * guest no longer waits for (already settled) is dropped: there is nothing to deliver.
   */
  settleInto(run: SandboxRun): boolean {
    let delivered = false;
    // Re-reads the count: an item pushed meanwhile goes in with the rest.
    for (let index = 0; index < this.#count; index++) {
      try {
        run.settle(this.#ids[index]!, this.#outcomes[index]!);
        delivered = true;
      } catch {
        // Not pending any more.
      }
    }
    this.#clear();
    return delivered;
  }

  #clear(): void {
    // The slots stay (no reallocation next time); their values are let go of.
    for (let index = 0; index < this.#count; index++) {
      this.#ids[index] = undefined as never;
      this.#outcomes[index] = undefined as never;
      this.#toolIds[index] = undefined;
    }
    this.#count = 0;
  }

  get size(): number {
    return this.#count;
  }

  has(requestId: string): boolean {
    for (let index = 0; index < this.#count; index++) {
      if (this.#ids[index] === requestId) return true;
    }
    return false;
  }

  /** Resolves when an item arrives, the deadline passes or the segment aborts. */
  waitForItem(deadlineAt: number, abort: SegmentAbort): Promise<void> {
    if (this.#count > 0 || abort.aborted) return Promise.resolve();
    const now = Date.now();
    if (now >= deadlineAt) return Promise.resolve();
    // The deadline moves only when a wait gives the run a fresh one: re-arm then, not per wait.
    if (this.#timer === null || this.#timerDueAt !== deadlineAt) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timerDueAt = deadlineAt;
      this.#timer = setTimeout(this.#onDeadline, deadlineAt - now);
    }
    const { signal } = abort;
    if (this.#signal !== signal) {
      this.#signal?.removeEventListener("abort", this.#fire);
      this.#signal = signal;
      signal.addEventListener("abort", this.#fire, { once: true });
    }
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  /** Drops the deadline timer and the abort listener; a later wait sets them up again. */
  close(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#signal?.removeEventListener("abort", this.#fire);
    this.#signal = null;
  }
}

function abortedEnd(output: CodeModeOutput[]): SegmentEnd {
  return { type: "failed", code: "aborted", message: "The run was aborted.", output };
}

/**
 * While the driver waits for the run's next event, an abort of the segment disposes the run: its
 * terminal event (failed, aborted) then wakes the driver at once. One listener serves the whole
 * segment, and no promise of ours is wrapped around the run's own for each event.
 */
class DisposeOnAbort {
  waiting = false;
  readonly #onAbort = () => {
    if (this.waiting) this.run.dispose();
  };

  constructor(
    private readonly run: SandboxRun,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener("abort", this.#onAbort, { once: true });
  }

  close(): void {
    this.waiting = false;
    this.signal.removeEventListener("abort", this.#onAbort);
  }
}

// One object of each class the driver reads, kept for the process's life, so that their maps survive
// the garbage collections between cells (see keepShapes of @codecell/bridge): with them freed, `drive`
// saw new maps in every cell and V8 never optimized it while other cells ran in between.
keepShapes(new ReadyQueue(), new DisposeOnAbort({} as SandboxRun, new AbortController().signal));

/**
 * Drives the VM of one exec or wait call: every nested result that is ready goes in at once (inline
 * draining, no model round trip per await), under the run's one deadline. The call ends when the cell
 * completes or fails, when it yields, or when the deadline passes with nested calls still running, in
 * which case the VM is snapshotted and the calls keep running on the host.
 */
export async function driveSegment(
  run: SandboxRun,
  ready: ReadyQueue,
  abort: SegmentAbort,
): Promise<SegmentEnd> {
  const abortWatch = new DisposeOnAbort(run, abort.signal);
  try {
    return await drive(run, ready, abort, abortWatch);
  } finally {
    abortWatch.close();
    ready.close();
  }
}

async function drive(
  run: SandboxRun,
  ready: ReadyQueue,
  abort: SegmentAbort,
  abortWatch: DisposeOnAbort,
): Promise<SegmentEnd> {
  const output: CodeModeOutput[] = [];
  for (;;) {
    if (abort.aborted) {
      run.dispose();
      return abortedEnd(output);
    }
    abortWatch.waiting = true;
    const event = await run.next();
    abortWatch.waiting = false;
    // The run ended because the segment aborted (disposed above, or by its own listener): an abort.
    if (abort.aborted && event.type === "failed" && event.code === "aborted") {
      run.dispose();
      return abortedEnd(output);
    }
    for (const line of event.output) output.push(line);
    if (event.type === "completed") return { type: "completed", value: event.value, output };
    if (event.type === "failed") {
      const code = event.code ?? (isCodeModeErrorCode(event.error?.code) ? event.error?.code : undefined);
      return { type: "failed", ...(code ? { code } : {}), message: event.message, output };
    }
    // A yield the host has not answered yet (after a restore, the old yield is already in the queue).
    if (unansweredYield(event.pending, ready)) return suspend(run, "yield", output);
    // Idle with nested calls in flight: deliver what is ready, or wait for it until the deadline.
    let delivered = false;
    while (!delivered) {
      while (ready.size === 0) {
        if (abort.aborted) {
          run.dispose();
          return abortedEnd(output);
        }
        // The run's own deadline: set by the sandbox when the cell started, not when exec was called.
        // A call handed out of the host cannot settle here: waiting for the deadline would only delay.
        if (abort.handedOut || Date.now() >= run.deadline) return suspend(run, "pending_tools", output);
        await ready.waitForItem(run.deadline, abort);
      }
      delivered = ready.settleInto(run);
    }
  }
}

function unansweredYield(pending: readonly HostRequest[], ready: ReadyQueue): boolean {
  for (const request of pending) {
    if (request.kind === "yield" && !ready.has(request.requestId)) return true;
  }
  return false;
}

async function suspend(
  run: SandboxRun,
  reason: "pending_tools" | "yield",
  output: CodeModeOutput[],
): Promise<SegmentEnd> {
  try {
    const suspended = await run.suspend();
    return { type: "waiting", reason, snapshot: suspended.snapshot, pending: suspended.pending, output };
  } catch (error) {
    run.dispose();
    if (CodeModeError.is(error)) return { type: "failed", code: error.code, message: error.message, output };
    return {
      type: "failed",
      code: "internal_error",
      message: `Suspending the run failed: ${String(error)}`,
      output,
    };
  }
}
