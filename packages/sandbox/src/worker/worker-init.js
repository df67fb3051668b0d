// @ts-check
import { SharedChannel } from "@codecell/bridge";
import { CODE_MODE_LIMITS } from "@codecell/contract/errors";
import { QuickJS } from "quickjs-wasi";
import { compileGuestPrelude, GUEST_PRELUDE_SOURCE } from "./guest-prelude.js";
import { post } from "./outbox.js";
import { VM_STACK_BYTES, VmImage } from "./vm-image.js";
import { createOwnedVm, dropVm, offerFreshImage, spareVms } from "./vm-pool.js";
import { seedEntropy, silentWasi, takeEntropy } from "./wasi-entropy.js";
import { state } from "./worker-state.js";

/**
 * A worker's set-up (`init`): the wasm module every VM is made from, the snapshot secret, the host's
 * doorbell and shared channel, and the prelude's bytecode (the build's, shipped, or compiled here).
 */

/**
 * Take what `init` hands over, set up the VMs once and answer ready (or why not).
 * @param {import("@codecell/bridge").HostToWorkerMessage & { type: "init" }} message
 * @param {(error: unknown) => void} onFailure
 */
export function onInit(message, onFailure) {
  state.snapshotSecret = message.snapshotSecret;
  state.doorbell = message.doorbell ?? null;
  if (message.channel !== undefined) state.channel = new SharedChannel(message.channel, "worker");
  adoptShippedPrelude(message.prelude);
  if (message.entropy !== undefined) seedEntropy(message.entropy);
  answerInit(/** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (message.module)).catch(onFailure);
}

/**
 * Compiling in a VM of its own keeps the compiler's garbage out of the runs' heaps (and out of
 * their snapshots: compiled in the first run's VM it would make that run's snapshot larger).
 * @param {QuickJS} vm
 */
function compilePrelude(vm) {
  state.preludeBytecode ??= compileGuestPrelude(vm);
  return state.preludeBytecode;
}

/**
 * Take the host's shipped bytecode when it was compiled from exactly this worker's prelude source, and
 * with it the shipped image of a fresh VM given that bytecode (see VmImage.deserialize): the VMs of its
 * memory limit are then made from the image, the first one included, instead of by QuickJS's start-up
 * and the bytecode's evaluation, which on a new worker run in wasm that V8 has not compiled yet and set
 * V8 compiling a dozen QuickJS functions with its optimizing compiler on the other core, beside the
 * first cell.
 * @param {{ source: string, bytecode: Uint8Array, image?: Uint8Array } | null | undefined} shipped
 */
function adoptShippedPrelude(shipped) {
  if (state.preludeBytecode !== null || shipped == null || shipped.source !== GUEST_PRELUDE_SOURCE) return;
  state.preludeBytecode = shipped.bytecode;
  const image = shipped.image === undefined ? null : VmImage.deserialize(shipped.image, takeEntropy);
  if (image !== null) {
    offerFreshImage(image.memoryLimit, { image: image.image, preludePointer: image.preludePointer });
  }
}

function throwawayVm() {
  return QuickJS.create({
    wasm: /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (state.wasmModule),
    maxStackSize: VM_STACK_BYTES,
    wasi: silentWasi,
  });
}

export async function compilePreludeAside() {
  const vm = await throwawayVm();
  try {
    return compilePrelude(vm);
  } finally {
    dropVm(vm);
  }
}

/**
 * The VM set-up of the first `init`: null when it worked, else why not. A worker started early (as the
 * sandbox package loads) is sent the module as soon as it is compiled, with no secret, and its pool's
 * own `init` later: the set-up runs once, and the secret is always the latest init's.
 * @type {Promise<string | null> | null}
 */
let initialized = null;
/** The throwaway VM of `init`, kept until the prelude is compiled in it. @type {QuickJS | null} */
let initVm = null;

/**
 * One VM proves the module instantiates here. With the prelude's bytecode already in hand it is the
 * spare for the default memory limit, which the first run takes (a run with another limit makes its
 * own); without, it is the throwaway VM the prelude is compiled in once the host knows we are ready.
 * @param {import("quickjs-wasi").QuickJSOptions["wasm"]} module @returns {Promise<string | null>}
 */
async function initialize(module) {
  try {
    state.wasmModule = module;
    if (state.preludeBytecode !== null) {
      const limit = CODE_MODE_LIMITS.memoryLimitBytes.default;
      const spare = createOwnedVm(limit);
      spareVms.set(limit, spare);
      await spare;
    } else {
      initVm = await throwawayVm();
    }
    return null;
  } catch (error) {
    spareVms.clear();
    return String(/** @type {Error} */ (error)?.message ?? error);
  }
}

/** Compile the prelude in init's throwaway VM, once the host knows the worker is ready. */
function compilePreludeAtInit() {
  const vm = initVm;
  initVm = null;
  if (vm === null) return;
  try {
    compilePrelude(vm);
  } catch {
    // The first run compiles it aside and reports what went wrong.
  } finally {
    dropVm(vm);
  }
}

/** @param {import("quickjs-wasi").QuickJSOptions["wasm"]} module */
async function answerInit(module) {
  initialized ??= initialize(module);
  const failure = await initialized;
  // A later init may try again.
  if (failure !== null) initialized = null;
  post(failure === null ? { type: "ready" } : { type: "init-failed", message: failure });
  // A first cell sent meanwhile waits for this either way.
  compilePreludeAtInit();
}
