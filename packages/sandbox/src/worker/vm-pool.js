// @ts-check
import { JSValueHandle, QuickJS } from "quickjs-wasi";
import { HOST_FUNCTION_NAME } from "./host-calls.js";
import { linearMemoryOf } from "./quickjs-wasi-internals.js";
import { runVmOptions, VmImage } from "./vm-image.js";
import { VmStrings } from "./vm-strings.js";
import { silentWasi, takeEntropy } from "./wasi-entropy.js";
import { state } from "./worker-state.js";

/**
 * The worker's VMs: made ahead of time (a spare per memory limit), made from a fresh VM's image
 * instead of by QuickJS's start-up, reset in place when their run ends (recycled), and dropped so V8
 * frees their memory soon.
 * @typedef {import("./guest-run.js").GuestRun} GuestRun
 */
/**
 * The size a dropped VM's linear memory is grown to as it is let go (see dropVm): 4 MB, so that V8's
 * 64 MB external-memory step comes after about 20 dropped VMs. It trades peak memory against CPU: each
 * full collection of this worker's heap costs CPU (V8's helpers, and the worker's optimised code that
 * held the dead VM is compiled again), so a larger size (fewer dead VMs at a time, a lower peak) costs
 * trivial cells more; the sandbox bench's concurrent trivial cells and its peak RSS show both sides.
 */
const DROPPED_MEMORY_BYTES = 4 * 1024 * 1024;
const WASM_PAGE_BYTES = 64 * 1024;

/**
 * Dispose of a VM so that V8 frees its linear memory soon.
 *
 * A VM's linear memory (of which a fresh VM with the prelude touches a small part) is freed only
 * when V8 collects the wasm instance, and V8 allocates instances in the old generation, so only a
 * full collection of this worker's heap frees it. V8 starts one when the old generation has grown
 * enough, or when array buffers (a wasm memory counts at its byte length) have grown by 64 MB since
 * the last one. A VM adds little to this worker's heap (see the export filter in wasm-module.ts), so
 * in a loop of trivial cells dozens of dropped VMs, all resident, would wait for a collection. Growing a
 * dropped memory maps address space that nothing ever touches (no resident memory, no page faults;
 * the instance is disposed, so no code runs in it again) and counts towards that 64 MB, so a full
 * collection comes after about 20 dropped VMs (test/vm-memory-release.test.ts counts them).
 * A memory that cannot grow (address space refused) is dropped as it is.
 * @param {QuickJS} vm
 */
export function dropVm(vm) {
  // A VM already disposed has no memory left to account for.
  const memory = linearMemoryOf(vm);
  try {
    vm.dispose();
  } finally {
    if (typeof memory?.grow === "function") {
      const missing = DROPPED_MEMORY_BYTES - memory.buffer.byteLength;
      try {
        if (missing > 0) memory.grow(Math.ceil(missing / WASM_PAGE_BYTES));
      } catch {
        // Address space refused: the memory is freed by whichever collection comes first.
      }
    }
  }
}

/**
 * A fresh VM per run, made (or reset, see recycleVm) ahead of time, so the next start skips
 * instantiation. A worker builds it when a run ends or has waited on the host for a while
 * (IDLE_WORK_AFTER_MS), never between a run's quick host calls, which it would hold up by a millisecond
 * each time. A spare has run no guest code: only the evaluation of the prelude's bytecode (see
 * createOwnedVm), and, when this worker's last starts shared one surface, the prelude itself with that
 * surface (see applySurface); it is handed to exactly one run. Keyed by memory limit, the one option that cannot change after creation; the
 * interrupt handler and the host function follow whichever run owns it.
 * `surface` and `control`: the surface text the prelude was run with and the control function it
 * returned, or null when the run is to run the prelude itself.
 * `image`: the fresh image this VM can be reset to when its run ends (see recycleVm), or null.
 * @typedef {{ vm: QuickJS, owner: { run: GuestRun | null }, prelude: import("quickjs-wasi").JSValueHandle | null, surface: string | null, control: import("quickjs-wasi").JSValueHandle | null, image: FreshImage | null }} OwnedVm
 * @type {Map<number, Promise<OwnedVm>>}
 */
export const spareVms = new Map();
const MAX_SPARE_LIMITS = 2;

/**
 * A fresh VM's image (see vm-image.js) and where the prelude function that VM was given is in it.
 * @typedef {{ image: VmImage, preludePointer: number }} FreshImage
 */
/**
 * The image per memory limit (null: this QuickJS build cannot be reset, or no room for another limit),
 * taken from the first VM made after this worker's first run ended, so the probing is never on the
 * way to a worker's first cell.
 * @type {Map<number, FreshImage | null>}
 */
const freshImages = new Map();
const MAX_IMAGE_LIMITS = 4;
let imagesWanted = false;

/** Take images from now on (a run has ended: the probing is no longer on the way to a first cell). */
export function startTakingImages() {
  imagesWanted = true;
}

/**
 * Keep `fresh` as the image of its memory limit's VMs unless that limit has one (the image the build
 * ships, see worker-init.js).
 * @param {number} memoryLimit @param {FreshImage} fresh
 */
export function offerFreshImage(memoryLimit, fresh) {
  if (!freshImages.has(memoryLimit)) freshImages.set(memoryLimit, fresh);
}
/**
 * VMs of finished runs, reset to their image, for the next VMs made for their limit (createOwnedVm), for
 * at most MAX_SPARE_LIMITS limits. A worker keeps as many per limit as it has runs live besides the one
 * ending, plus one (at most MAX_RECYCLED_PER_LIMIT: runs that overlap each get one back when they end),
 * and one once it has no run live; any other finished run's VM is dropped.
 * @type {Map<number, OwnedVm[]>}
 */
const recycledVms = new Map();
const MAX_RECYCLED_PER_LIMIT = 8;

/**
 * The image for VMs of `memoryLimit`, taken from `vm` (fresh, given only the prelude's bytecode, whose
 * function is `prelude`) if there is none yet; `undefined` when taking it spent `vm` (the probes ran
 * code in it and the build cannot be reset), which the caller then drops.
 * @param {number} memoryLimit @param {QuickJS} vm @param {import("quickjs-wasi").JSValueHandle} prelude
 * @returns {FreshImage | null | undefined}
 */
function imageFor(memoryLimit, vm, prelude) {
  const known = freshImages.get(memoryLimit);
  if (known !== undefined || !imagesWanted) return known ?? null;
  if (freshImages.size >= MAX_IMAGE_LIMITS) return null;
  const image = VmImage.capture(vm, takeEntropy);
  const fresh = image === null ? null : { image, preludePointer: prelude.ptr };
  freshImages.set(memoryLimit, fresh);
  return fresh === null ? undefined : fresh;
}

/**
 * Make a finished run's VM fresh again for the next run of its memory limit: whether it was (else the
 * caller drops it). Only a VM made from an image, whose run ended without being forced (a timeout, a
 * memory limit, a crash: such a VM is dropped as before) and which fits its image (see VmImage.fits).
 * @param {OwnedVm} owned @param {number} memoryLimit
 */
export function recycleVm(owned, memoryLimit) {
  const fresh = owned.image;
  const kept = recycledVms.get(memoryLimit) ?? [];
  const wanted = Math.min(MAX_RECYCLED_PER_LIMIT, state.runs.size + 1);
  if (fresh === null || kept.length >= wanted) return false;
  if (kept.length === 0 && recycledVms.size >= MAX_SPARE_LIMITS) return false;
  if (!fresh.image.fits(owned.vm)) return false;
  try {
    fresh.image.reset(owned.vm);
  } catch {
    return false;
  }
  owned.owner.run = null;
  kept.push({
    vm: owned.vm,
    owner: owned.owner,
    prelude: new JSValueHandle(owned.vm, fresh.preludePointer),
    surface: null,
    control: null,
    image: fresh,
  });
  recycledVms.set(memoryLimit, kept);
  return true;
}

/** With no run live, keep one reset VM per limit (a burst of overlapping runs kept more). */
export function trimRecycledVms() {
  if (state.runs.size > 0) return;
  for (const kept of recycledVms.values()) {
    for (const extra of kept.splice(1)) dropVm(extra.vm);
  }
}

/**
 * A VM for one run. With the prelude's bytecode in hand its evaluation is done here too, ahead of the
 * run: it only makes the prelude function (nothing of the prelude runs until the run calls it with its
 * host function and surface), and on a worker's first VM it is the bulk of a start's time (V8 compiles
 * the QuickJS functions it needs on their first call). Should that fail (a memory limit too small for
 * it), the VM is replaced by one without, and the run evaluates the prelude itself as before.
 * @param {number} memoryLimit @param {boolean} [withPrelude] @returns {Promise<OwnedVm>}
 */
export function createOwnedVm(memoryLimit, withPrelude = true) {
  const kept = withPrelude && state.preludeBytecode !== null ? recycledVms.get(memoryLimit) : undefined;
  const recycled = kept?.pop();
  if (kept?.length === 0) recycledVms.delete(memoryLimit);
  if (recycled !== undefined) return Promise.resolve(recycled);
  /** @type {{ run: GuestRun | null }} */
  const owner = { run: null };
  const options = runVmOptions(
    /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (state.wasmModule),
    memoryLimit,
    () => owner.run?.shouldInterrupt() === true,
    silentWasi,
  );
  const fresh = withPrelude && state.preludeBytecode !== null ? freshImages.get(memoryLimit) : undefined;
  if (fresh != null) {
    // Made from the image: the fresh VM without QuickJS's start-up or the bytecode's evaluation.
    return fresh.image.instantiate(options).then(
      (vm) => ({
        vm,
        owner,
        prelude: new JSValueHandle(vm, fresh.preludePointer),
        surface: null,
        control: null,
        image: fresh,
      }),
      () => {
        // Not expected (the image was made for this module); make this limit's VMs as before.
        freshImages.delete(memoryLimit);
        return createOwnedVm(memoryLimit, withPrelude);
      },
    );
  }
  return QuickJS.create(options).then((vm) => {
    const preludeBytecode = state.preludeBytecode;
    if (!withPrelude || preludeBytecode === null)
      return { vm, owner, prelude: null, surface: null, control: null, image: null };
    let prelude;
    try {
      prelude = vm.evalBytecode(preludeBytecode);
    } catch {
      dropVm(vm);
      return createOwnedVm(memoryLimit, false);
    }
    const image = imageFor(memoryLimit, vm, prelude);
    if (image === undefined) {
      dropVm(vm);
      return createOwnedVm(memoryLimit, withPrelude);
    }
    return { vm, owner, prelude, surface: null, control: null, image };
  });
}

/**
 * The surface of this worker's latest start, its memory limit, and how many starts in a row used that
 * pair. A session's cells share their run's surface, and with a catalog of hundreds of tools running
 * the prelude with it is most of a trivial cell's time (the prelude defines a function for every tool):
 * once two starts in a row agree, the next spare gets it ahead of time.
 */
let recentSurface = "";
let recentSurfaceLimit = 0;
let recentSurfaceStarts = 0;

/** @param {string} surface @param {number} memoryLimit */
export function noteStartSurface(surface, memoryLimit) {
  if (memoryLimit === recentSurfaceLimit && surface === recentSurface) {
    recentSurfaceStarts += 1;
    return;
  }
  recentSurface = surface;
  recentSurfaceLimit = memoryLimit;
  recentSurfaceStarts = 1;
}

/**
 * A spare's host function until a run owns the VM (nothing calls it: the prelude only keeps it).
 * @returns {import("quickjs-wasi").JSValueHandle}
 */
function unownedHostCall() {
  throw new Error("no run owns this VM yet");
}

/**
 * Run the prelude in a spare with `surface`, as a start would (with a host function that the run which
 * takes the spare points at itself, see GuestRun.start). Done only while no run is live on this worker,
 * so no run's message waits behind it. If it fails, the spare is replaced by a plain one.
 * @param {OwnedVm} owned @param {string} surface @param {number} memoryLimit @returns {Promise<OwnedVm> | OwnedVm}
 */
function applySurface(owned, surface, memoryLimit) {
  const prelude = owned.prelude;
  if (prelude === null) return owned;
  const vm = owned.vm;
  const strings = new VmStrings(vm);
  /** @type {import("quickjs-wasi").JSValueHandle | null} */
  let control = null;
  try {
    const host = vm.newFunction(HOST_FUNCTION_NAME, unownedHostCall);
    const text = strings.newString(surface);
    try {
      control = vm.callFunction(prelude, vm.undefined, host, text);
    } finally {
      host.dispose();
      text.dispose();
      strings.release();
      prelude.dispose();
    }
  } catch {
    control = null;
  }
  if (control !== null)
    return { vm, owner: owned.owner, prelude: null, surface, control, image: owned.image };
  dropVm(vm);
  return createOwnedVm(memoryLimit);
}

/** @param {number} memoryLimit */
function prepareSpare(memoryLimit) {
  if (spareVms.has(memoryLimit) || spareVms.size >= MAX_SPARE_LIMITS) return;
  const surface =
    recentSurfaceStarts >= 2 && recentSurfaceLimit === memoryLimit && state.runs.size === 0
      ? recentSurface
      : null;
  const plain = createOwnedVm(memoryLimit);
  const spare = surface === null ? plain : plain.then((owned) => applySurface(owned, surface, memoryLimit));
  spare.catch(() => spareVms.delete(memoryLimit));
  spareVms.set(memoryLimit, spare);
}

/** @type {Set<number>} memory limits wanting a spare once the worker is free */
export const sparesWanted = new Set();

/**
 * Ask for a spare VM. It is built when no run operation is in progress, so it never sits between a
 * run's message and its answer (a restore or a quick settle arriving meanwhile goes first).
 * @param {number} memoryLimit
 */
export function wantSpare(memoryLimit) {
  sparesWanted.add(memoryLimit);
  setImmediate(buildWantedSpares);
}

export function buildWantedSpares() {
  if (state.operationsInFlight > 0) return;
  for (const limit of sparesWanted) prepareSpare(limit);
  sparesWanted.clear();
}

/**
 * A fresh VM for a run: the spare when there is one that fits (a spare applied to another surface is
 * dropped; the run gets a plain VM).
 * @param {GuestRun} run @param {string} surface
 */
export async function takeFreshVm(run, surface) {
  const limit = run.limits.memoryLimitBytes;
  const spare = spareVms.get(limit);
  spareVms.delete(limit);
  let owned;
  try {
    owned = await (spare ?? createOwnedVm(limit));
  } catch {
    owned = await createOwnedVm(limit);
  }
  if (owned.surface !== null && owned.surface !== surface) {
    if (!recycleVm(owned, limit)) dropVm(owned.vm);
    owned = await createOwnedVm(limit);
  }
  owned.owner.run = run;
  return owned;
}
