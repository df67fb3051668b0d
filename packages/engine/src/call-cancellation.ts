/**
 * The cancellation of one nested call. An `AbortSignal` costs more to make than a quick tool call costs
 * to run, and most executors never read it; so the controller is made the first time someone asks for
 * the signal, already aborted (with the same reason) when the call was cancelled before that.
 */
export class CallCancellation {
  #controller: AbortController | null = null;
  #reason: Error | null = null;

  get aborted(): boolean {
    return this.#reason !== null;
  }

  /** Why the call was cancelled, or null while it is not. */
  get reason(): Error | null {
    return this.#reason;
  }

  /** The first reason wins, as with `AbortController.abort`. */
  abort(reason: Error): void {
    if (this.#reason !== null) return;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }

  get signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#reason !== null) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
}
