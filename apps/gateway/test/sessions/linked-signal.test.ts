import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { linkSignals } from "../../src/sessions/linked-signal.js";

describe("linkSignals", () => {
  it("aborts with the reason of whichever signal aborts first", () => {
    const session = new AbortController();
    const call = new AbortController();
    const linked = linkSignals(session.signal, call.signal);
    expect(linked.signal.aborted).toBe(false);
    call.abort("the client cancelled");
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("the client cancelled");

    const other = linkSignals(session.signal, new AbortController().signal);
    session.abort("the session ended");
    expect(other.signal.reason).toBe("the session ended");
    // Every link is born aborted once the session has ended.
    expect(linkSignals(session.signal, new AbortController().signal).signal.reason).toBe("the session ended");
  });

  it("is the session's own signal when the call has none, and aborted when the call's already is", () => {
    const session = new AbortController();
    expect(linkSignals(session.signal, undefined).signal).toBe(session.signal);
    const call = new AbortController();
    call.abort("gone");
    expect(linkSignals(session.signal, call.signal).signal.reason).toBe("gone");
  });

  it("leaves nothing on a long-lived signal once its calls have ended", () => {
    const session = new AbortController();
    // A session that runs many cells: AbortSignal.any kept one entry per call on the session's signal.
    for (let index = 0; index < 10_000; index++) {
      const call = new AbortController();
      const linked = linkSignals(session.signal, call.signal);
      if (index % 2 === 0) call.abort();
      linked.release();
      expect(getEventListeners(call.signal, "abort")).toHaveLength(0);
    }
    expect(getEventListeners(session.signal, "abort")).toHaveLength(0);
    // A released link no longer follows the session.
    const call = new AbortController();
    const released = linkSignals(session.signal, call.signal);
    released.release();
    session.abort();
    expect(released.signal.aborted).toBe(false);
  });
});
