import type { SettleOutcome } from "@codecell/sandbox";
import type { SnapshotStore } from "@codecell/snapshot-store";

type InflightCall = {
  toolId: string;
  startedAt: string;
  controller: AbortController;
  outcome?: SettleOutcome;
};

/**
 * The nested calls of one code-mode run that are still running on the host. They outlive the exec (or
 * wait) that started them: while the run is suspended their outcomes go to the snapshot store, and
 * while a segment drives the VM they go straight to it.
 */
export class InflightCalls {
  readonly #calls = new Map<string, InflightCall>();
  #sink: ((requestId: string, outcome: SettleOutcome, toolId: string) => void) | null = null;
  #stored: { store: SnapshotStore; runId: string } | null = null;

  constructor(readonly sessionId: string) {}

  get size(): number {
    return this.#calls.size;
  }

  add(requestId: string, toolId: string, controller: AbortController, outcome: Promise<SettleOutcome>): void {
    const call: InflightCall = { toolId, startedAt: new Date().toISOString(), controller };
    this.#calls.set(requestId, call);
    void outcome.then((settled) => {
      call.outcome = settled;
      if (this.#sink) {
        this.#calls.delete(requestId);
        this.#sink(requestId, settled, call.toolId);
      } else if (this.#stored) {
        const { store, runId } = this.#stored;
        store.settleCall(runId, requestId, settled as never).catch(() => {});
      }
    });
  }

  get(requestId: string): Readonly<InflightCall> | undefined {
    return this.#calls.get(requestId);
  }

  /** A live segment takes outcomes from now on (it also gets those that settled while detached). */
  attach(sink: (requestId: string, outcome: SettleOutcome, toolId: string) => void): void {
    this.#sink = sink;
  }

  detach(): void {
    this.#sink = null;
  }

  /** Outcomes that arrive from now on are recorded in the store under this run. */
  storedAs(store: SnapshotStore, runId: string): void {
    this.#stored = { store, runId };
    // Calls that settled between the snapshot and the store write.
    for (const [requestId, call] of this.#calls) {
      if (call.outcome) store.settleCall(runId, requestId, call.outcome as never).catch(() => {});
    }
  }

  /** Removes and returns a settled call's outcome, if it has one. */
  take(requestId: string): SettleOutcome | undefined {
    const call = this.#calls.get(requestId);
    if (!call?.outcome) return undefined;
    this.#calls.delete(requestId);
    return call.outcome;
  }

  abortAll(reason: string): void {
    for (const call of this.#calls.values()) call.controller.abort(new Error(reason));
    this.#calls.clear();
    this.#sink = null;
    this.#stored = null;
  }
}
