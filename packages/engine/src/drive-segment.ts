import type { HostRequest } from "@codecell/bridge";
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

/** Results ready to go into the VM; the driver alone settles them, so it always knows when it is idle. */
export class ReadyQueue {
  readonly #items: Array<[string, SettleOutcome, string?]> = [];
  #wake: (() => void) | null = null;

  /** `toolId` names a nested call's tool, so an outcome left here at suspension is stored with it. */
  push(requestId: string, outcome: SettleOutcome, toolId?: string): void {
    this.#items.push([requestId, outcome, toolId]);
    this.#wake?.();
  }

  drain(): Array<[string, SettleOutcome, string?]> {
    return this.#items.splice(0);
  }

  get size(): number {
    return this.#items.length;
  }

  has(requestId: string): boolean {
    return this.#items.some(([id]) => id === requestId);
  }

  /** Resolves when an item arrives, the deadline passes or the signal aborts. */
  waitForItem(deadlineAt: number, signal: AbortSignal): Promise<void> {
    if (this.#items.length > 0 || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.#wake = null;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, deadlineAt - Date.now()));
      signal.addEventListener("abort", done, { once: true });
      this.#wake = done;
    });
  }
}

function abortedEnd(output: CodeModeOutput[]): SegmentEnd {
  return { type: "failed", code: "aborted", message: "The run was aborted.", output };
}

function nextOrAbort(run: SandboxRun, signal: AbortSignal) {
  if (signal.aborted) return Promise.resolve(null);
  return new Promise<Awaited<ReturnType<SandboxRun["next"]>> | null>((resolve, reject) => {
    const onAbort = () => resolve(null);
    signal.addEventListener("abort", onAbort, { once: true });
    run.next().then(
      (event) => {
        signal.removeEventListener("abort", onAbort);
        resolve(event);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Drives the VM of one exec or wait call: every nested result that is ready goes in at once (inline
 * draining, no model round trip per await), under the run's one deadline. The call ends when the cell
 * completes or fails, when it yields, or when the deadline passes with nested calls still running, in
 * which case the VM is snapshotted and the calls keep running on the host.
 */
export async function driveSegment(
  run: SandboxRun,
  ready: ReadyQueue,
  signal: AbortSignal,
): Promise<SegmentEnd> {
  const output: CodeModeOutput[] = [];
  for (;;) {
    const event = await nextOrAbort(run, signal);
    if (event === null) {
      run.dispose();
      return abortedEnd(output);
    }
    output.push(...event.output);
    if (event.type === "completed") return { type: "completed", value: event.value, output };
    if (event.type === "failed") {
      const code = event.code ?? (isCodeModeErrorCode(event.error?.code) ? event.error?.code : undefined);
      return { type: "failed", ...(code ? { code } : {}), message: event.message, output };
    }
    // A yield the host has not answered yet (after a restore, the old yield is already in the queue).
    if (event.pending.some((request) => request.kind === "yield" && !ready.has(request.requestId))) {
      return suspend(run, "yield", output);
    }
    // Idle with nested calls in flight: deliver what is ready, or wait for it until the deadline.
    let delivered = false;
    while (!delivered) {
      while (ready.size === 0) {
        if (signal.aborted) {
          run.dispose();
          return abortedEnd(output);
        }
        // The run's own deadline: set by the sandbox when the cell started, not when exec was called.
        if (Date.now() >= run.deadline) return suspend(run, "pending_tools", output);
        await ready.waitForItem(run.deadline, signal);
      }
      for (const [requestId, outcome] of ready.drain()) {
        try {
          run.settle(requestId, outcome);
          delivered = true;
        } catch {
          // The guest no longer waits for this id (already settled): nothing to deliver.
        }
      }
    }
  }
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
