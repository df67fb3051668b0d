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
  #stored: { store: SnapshotStore; runId: string; forget: () => void } | null = null;

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
        this.#record(requestId, settled);
      }
    });
  }

  /**
   * Hands a settled call's outcome to the store and lets go of it once the store has it. When the run is
   * gone (finished on another replica, expired, aborted), nothing will read the rest either: they are
   * cancelled and the table lets go of the run. If the store cannot be reached, the outcome stays here
   * for a resume in this process.
   */
  #record(requestId: string, outcome: SettleOutcome): void {
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
      () => {},
    );
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
    for (const [requestId, call] of this.#calls) {
      if (call.outcome) this.#record(requestId, call.outcome);
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
