// @ts-check

/**
 * The worker thread's port to the host, and its synchronous read (`receiveMessageOnPort` of that port)
 * for the serve loop's wait on the host. Set once by the worker's entry (sandbox-worker.js), before the
 * first message.
 * @type {import("node:worker_threads").MessagePort}
 */
export let port = /** @type {import("node:worker_threads").MessagePort} */ (
  /** @type {unknown} */ ({
    postMessage() {
      throw new Error("the sandbox's modules were not connected to a host (useWorkerPort)");
    },
  })
);
/** @type {(() => { message: unknown } | undefined) | null} */
export let receiveFromPort = null;

/**
 * What a protocol violation or an unreadable host message does: throw out of the thread, so the host's
 * exit handler fails its runs and replaces the worker.
 * @param {unknown} error
 */
export function failWorker(error) {
  setImmediate(() => {
    throw error;
  });
}

/**
 * Point these modules at the host through the worker thread's port, with `receive` its synchronous
 * read (`receiveMessageOnPort` of it).
 * @param {import("node:worker_threads").MessagePort} workerPort
 * @param {(port: import("node:worker_threads").MessagePort) => { message: unknown } | undefined} receive
 */
export function useWorkerPort(workerPort, receive) {
  port = workerPort;
  receiveFromPort = () => receive(workerPort);
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
