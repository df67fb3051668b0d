// @ts-check

/**
 * What the worker's modules send the host through: a worker thread's port, or, for a sandbox run on the
 * host's own thread (in-thread.js), a direct transport with the same `postMessage`. Set once, by the
 * entry that boots these modules (sandbox-worker.js or in-thread.js), before the first message.
 * @typedef {{ postMessage(message: unknown, transfer?: ArrayBuffer[]): void }} HostPort
 * @type {HostPort}
 */
export let port = /** @type {HostPort} */ ({
  postMessage() {
    throw new Error("the sandbox's modules were not connected to a host (useWorkerPort or useHostTransport)");
  },
});
/**
 * A worker thread's port read synchronously (`receiveMessageOnPort` of that port), for the serve loop's
 * wait on the host; null on the host's own thread, which never waits so. Given by the worker's entry,
 * so that node:worker_threads (about 4 ms to load) is never loaded for a sandbox on the host's thread.
 * @type {(() => { message: unknown } | undefined) | null}
 */
export let receiveFromPort = null;
/**
 * What a protocol violation or an unreadable host message does: in a worker thread, throw out of the
 * thread, so the host's exit handler fails its runs and replaces it; on the host's thread, the direct
 * transport tells the host side instead (a throw there would take the host down).
 * @type {(error: unknown) => void}
 */
export let failWorker = (error) => {
  setImmediate(() => {
    throw error;
  });
};

/**
 * Point these modules at the host through a worker thread's port (the worker's entry), with `receive`
 * its synchronous read (`receiveMessageOnPort` of it).
 * @param {import("node:worker_threads").MessagePort} workerPort
 * @param {(port: import("node:worker_threads").MessagePort) => { message: unknown } | undefined} receive
 */
export function useWorkerPort(workerPort, receive) {
  port = workerPort;
  receiveFromPort = () => receive(workerPort);
}

/**
 * Point these modules at the host through `hostPort` and `onFailure` (the in-thread entry).
 * @param {HostPort} hostPort @param {(error: unknown) => void} onFailure
 */
export function useHostTransport(hostPort, onFailure) {
  port = hostPort;
  failWorker = onFailure;
}

/**
 * What the worker's modules share, in one object: what `init` hands over, the runs and how many of
 * their operations are in progress. Each field is set here, in this order, so the object keeps one
 * hidden class for the worker's life (the serve loop and every host call read it). State that only one
 * module reads (the VM pool's spares, the serve loop's spin, the entropy pool) stays in that module.
 * @type {{
 *   wasmModule: import("quickjs-wasi").QuickJSOptions["wasm"] | null,
 *   snapshotSecret: string | null,
 *   doorbell: Int32Array | null,
 *   channel: import("@codecell/bridge").SharedChannel | null,
 *   preludeBytecode: Uint8Array | null,
 *   runs: Map<string, import("./guest-run.js").GuestRun>,
 *   operationsInFlight: number,
 * }}
 */
export const state = {
  /** The compiled quickjs.wasm (init). */
  wasmModule: null,
  /** The pool's snapshot secret (the latest init's). */
  snapshotSecret: null,
  /** The host's doorbell (init): its count goes up after every message the host posts. */
  doorbell: null,
  /** The host's shared channel of this worker (init; see @codecell/bridge shared-channel). */
  channel: null,
  /**
   * The prelude's bytecode, evaluated into every VM (evaluating bytecode skips parsing the prelude for
   * each VM). Only our own bytes reach QuickJS's bytecode reader: either the bytecode our build compiled
   * and this package ships, which the host hands over in `init` after checking its hashes against the
   * wasm it runs and which is taken only when it was compiled from exactly this worker's prelude source
   * (see src/prelude-bytecode.ts), or, failing that, bytecode this worker compiles itself from that
   * source, in the throwaway VM of `init` that no guest code ever touches (see worker-init.js).
   */
  preludeBytecode: null,
  /** The runs on this worker, by run id. */
  runs: new Map(),
  /** Run operations (start, settle, restore, suspend) in progress on this worker. */
  operationsInFlight: 0,
};
