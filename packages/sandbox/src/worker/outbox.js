// @ts-check
import { countsOnPort, SHARED_SLOT_BYTES } from "@codecell/bridge";
import { port, state } from "./worker-state.js";

/**
 * What the worker sends the host: each message through the shared channel when the host is spinning
 * for it and it fits, else on the port; and a run's outbox, the requests that wait to leave with the
 * state message that ends the drain.
 * @typedef {import("./guest-run.js").GuestRun} GuestRun
 */

/** How long requests may wait in the outbox for the end of the drain. */
const OUTBOX_HOLD_MS = 1;
/** Messages the worker may hand over through the shared channel: plain JSON data, no transfers. */
const SHARED_CHANNEL_TYPES = new Set(["started", "request", "idle", "completed", "failed", "batch"]);
/** What a report carries when there is nothing to list (shared: a structured clone copies it anyway). */
export const NOTHING = /** @type {any[]} */ (/** @type {unknown} */ (Object.freeze([])));

/**
 * Send a message to the host: handed over through the shared channel when the host is spinning for it
 * (it just sent this worker a result) and it fits, else posted on the port.
 * @param {import("@codecell/bridge").WorkerToHostMessage} message @param {ArrayBuffer[]} [transfer]
 * @param {boolean} [small] false when the message is known to carry more text than the slot holds (it
 * is not encoded for the slot only to be refused there)
 */
export function post(message, transfer, small = true) {
  const shared = state.channel;
  if (shared !== null) {
    if (
      small &&
      transfer === undefined &&
      SHARED_CHANNEL_TYPES.has(message.type) &&
      shared.canSend() &&
      shared.send(JSON.stringify(message))
    ) {
      return;
    }
    if (countsOnPort(message.type)) shared.notePosted();
  }
  if (transfer === undefined) port.postMessage(message);
  else port.postMessage(message, transfer);
}

/**
 * Put a request the guest just made in its run's outbox; a drain that has run past OUTBOX_HOLD_MS sends
 * it at once, so the host can start work in parallel.
 * @param {GuestRun} run @param {import("@codecell/bridge").HostRequest} request
 * @param {number} chars its body's length (UTF-16 units)
 */
export function holdRequest(run, request, chars) {
  run.outbox.push(request);
  run.outboxChars += chars;
  if (performance.now() - run.commandStartedAt > OUTBOX_HOLD_MS) flushOutbox(run);
}

/**
 * Send the held requests, and `last` (the state message that ends a drain) after them. An idle
 * carries them in its `requests`: one flat message, cheaper to clone than a batch of a request and
 * an idle (the message of every quick host call). Anything else follows them in one batch.
 * @param {GuestRun} run @param {import("@codecell/bridge").WorkerToHostMessage} [last]
 * @param {ArrayBuffer[]} [transfer]
 */
export function flushOutbox(run, last, transfer) {
  const requests = run.outbox;
  const small = run.outboxChars + (last === undefined ? 0 : run.reportChars) < SHARED_SLOT_BYTES;
  run.outboxChars = 0;
  if (last !== undefined) run.reportChars = 0;
  if (requests.length === 0) {
    if (last !== undefined) post(last, transfer, small);
    return;
  }
  // post() copies what it sends before it returns (JSON text for the shared channel, or a structured
  // clone), so the outbox is emptied and kept. A fresh `[]` per drain would start with the small-integer
  // elements kind each time, and the first push into it would throw the optimized code of onRequest
  // away (deoptimized, "not a Smi"); see emptyReferenceArray.
  try {
    if (last?.type === "idle") {
      // A literal with its requests in it: `requests` added to the idle afterwards would give every
      // such idle a second hidden class, and a property store, on the way out.
      const { runId, pending, output } = last;
      post({ type: "idle", runId, pending, output, requests }, transfer, small);
      return;
    }
    /** @type {import("@codecell/bridge").WorkerToHostMessage[]} */
    const messages = [];
    for (const request of requests) messages.push({ type: "request", runId: run.runId, request });
    if (last !== undefined) messages.push(last);
    if (messages.length === 1) post(/** @type {any} */ (messages[0]), transfer, small);
    else post({ type: "batch", messages }, transfer, small);
  } finally {
    requests.length = 0;
  }
}

/**
 * The output not yet reported, to leave with the report being made.
 * @param {GuestRun} run
 */
export function takeOutput(run) {
  // The output (and returned value) charged so far leaves with the report being made.
  run.reportChars += run.unreportedChars;
  run.unreportedChars = 0;
  const output = run.output;
  if (output.length === 0) return NOTHING;
  run.output = [];
  return output;
}
