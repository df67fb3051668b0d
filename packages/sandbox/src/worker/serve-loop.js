// @ts-check
import { countsOnPort } from "@codecell/bridge";
import { handle, onMessage, protocolViolation } from "./host-messages.js";
import { receiveFromPort, state } from "./worker-state.js";

// How the worker takes the host's messages: from its event loop (the port's message event), or, while
// every run waits on the host, synchronously, spinning and then sleeping on the host's doorbell.

/**
 * How long the worker serves its runs synchronously (see serveWaitingRuns) before it returns to its
 * event loop for timers, spares and the engine's own tasks; the next host message starts a new period.
 */
const SYNC_SERVE_MS = 2;
/**
 * How long the worker, waiting for the host's next message, spins on the doorbell before it sleeps on
 * it (a sleep and its wake-up are system calls, the bulk of a thread hop on this kind of machine). A
 * spin that ends without a message makes the worker skip the next 1, 3, 7 ... 63 spins (see spinFor).
 */
const WORKER_SPIN_MS = 0.1;

/** Whether a message is being handled inside serveWaitingRuns (which must not nest). */
let serving = false;

/** @param {unknown} raw */
export function dispatch(raw) {
  takeFromPort(raw);
  if (!serving) serveWaitingRuns();
}

/**
 * A message taken off the port, counted so the host knows when the port is empty of its messages (it
 * uses the shared channel only then).
 * @param {unknown} raw
 */
function takeFromPort(raw) {
  const shared = state.channel;
  if (shared !== null && countsOnPort(/** @type {{ type?: unknown } | null} */ (raw)?.type))
    shared.noteTaken();
  handle(raw);
}

/**
 * A message the host handed over through the shared channel: JSON text, checked exactly like a port
 * message once parsed.
 * @param {string} text
 */
function handleShared(text) {
  try {
    onMessage(JSON.parse(text));
  } catch (error) {
    protocolViolation(error);
  }
}

/** Consecutive spins that ended without a message, and spins still to skip because of them. */
let spinMisses = 0;
let spinsToSkip = 0;

/**
 * Spin (bounded by WORKER_SPIN_MS) until the doorbell moves past `rung`: whether it did. Spins that keep
 * ending empty (slow tools, a host busy elsewhere) are skipped more and more often, so a worker whose
 * host answers slowly sleeps at once instead of burning a core.
 * @param {Int32Array} bell @param {number} rung @param {number} now
 */
function spinFor(bell, rung, now) {
  if (spinsToSkip > 0) {
    spinsToSkip -= 1;
    return false;
  }
  const until = now + WORKER_SPIN_MS;
  do {
    for (let index = 0; index < 64; index++) {
      if (Atomics.load(bell, 0) !== rung) {
        spinMisses = 0;
        return true;
      }
    }
  } while (performance.now() < until);
  spinMisses = Math.min(spinMisses + 1, 6);
  spinsToSkip = (1 << spinMisses) - 1;
  return false;
}

/**
 * While every run on this worker waits on host calls and nothing of the worker is in progress, wait
 * here (Atomics.wait on the host's doorbell) and take the host's next message off the port directly:
 * a loop of quick tool calls then costs no event-loop turn and no message event in this thread per
 * call. Any host message (a result, a start, a dispose, a suspend) rings the bell, so nothing waits
 * behind this; after SYNC_SERVE_MS, or when an operation goes asynchronous (a start, a restore, a
 * suspend), the worker returns to its event loop, which delivers later messages as before.
 */
function serveWaitingRuns() {
  const bell = state.doorbell;
  if (bell === null) return;
  serving = true;
  // While it serves here, the host may hand a settle over through the shared channel.
  const shared = state.channel;
  shared?.listen();
  try {
    const started = performance.now();
    while (state.operationsInFlight === 0 && state.runs.size > 0) {
      // Read the bell before looking for a message: one sent after this load changes the count, so the
      // spin and the wait below return at once instead of sleeping past it.
      const rung = Atomics.load(bell, 0);
      // The shared slot first: the host uses it only once this worker has taken everything it posted
      // on the port, so whatever the port holds now was sent after it.
      const text = shared === null ? null : shared.take(true);
      const next = text === null ? receiveFromPort?.() : undefined;
      const now = performance.now();
      const left = SYNC_SERVE_MS - (now - started);
      if (text !== null) handleShared(text);
      else if (next !== undefined) takeFromPort(next.message);
      else if (left > 0 && spinFor(bell, rung, now)) continue;
      else if (left <= 0 || Atomics.wait(bell, 0, rung, left) === "timed-out") return;
      else continue;
      if (left <= 0) return;
    }
  } finally {
    serving = false;
    // The host's exchange won the race with this one: its settle is handled here, not lost.
    const late = shared?.stopListening() ?? null;
    if (late !== null) handleShared(late);
  }
}
