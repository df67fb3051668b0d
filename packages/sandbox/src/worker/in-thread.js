// @ts-check
// The entry of the sandbox's modules when they run on the host's own thread (`thread: "in-thread"`, see
// src/in-thread-sandbox.ts) instead of in a worker thread: the same serve loop, runs, VMs, host calls and
// snapshots as sandbox-worker.js boots, with a direct transport in place of the worker's port. Nothing
// here runs guest code differently: the host side hands each message to `deliver` as a worker's port
// would hand it to the message handler, and the worker's messages come back through `sink.receive`.
import { dispatch } from "./serve-loop.js";
import { state, useHostTransport } from "./worker-state.js";

/**
 * Point the sandbox's modules at the host side: what they post goes to `sink.receive`, a protocol
 * violation (a host bug, which ends a worker thread) to `sink.fail`.
 * @param {{ receive(message: unknown, transfer?: ArrayBuffer[]): void, fail(error: unknown): void }} sink
 */
export function connect(sink) {
  useHostTransport({ postMessage: (message, transfer) => sink.receive(message, transfer) }, (error) =>
    sink.fail(error),
  );
}

/**
 * One host message of the sandbox whose snapshot key is `snapshotSecret`, handled as the worker's port
 * handler handles it. The key is the one a run begun by this message takes (see GuestRun): pools with
 * secrets of their own share these modules on the host's thread. No doorbell and no shared channel
 * are ever given in this mode (the init of an in-thread pool has none), so the serve loop never waits
 * synchronously for the host: it returns at once, as the host's own thread must.
 * @param {unknown} message @param {string | null} snapshotSecret
 */
export function deliver(message, snapshotSecret) {
  state.snapshotSecret = snapshotSecret;
  dispatch(message);
}

/**
 * End these runs here, dropping their VMs (the host stopped what stands for their worker). The host
 * calls this only between guest operations: guest code runs on its thread, so none is running now.
 * @param {Iterable<string>} runIds
 */
export function releaseRuns(runIds) {
  for (const runId of runIds) state.runs.get(runId)?.release();
}
