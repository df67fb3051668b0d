// @ts-check
import { parentPort, receiveMessageOnPort } from "node:worker_threads";
// Both entries are zod-free, so a worker starts without loading the contract's schemas.
import {
  countsOnPort,
  DOUBLE_ZERO,
  emptyReferenceArray,
  exceedsJsonDepth,
  MAX_BRIDGE_DEPTH,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ERROR_NAME_LENGTH,
  parseHostRequestBody,
  parseHostToWorkerMessage,
  SHARED_SLOT_BYTES,
  SharedChannel,
  takesToolCallSlot,
} from "@codecell/bridge";
import { CODE_MODE_LIMITS, CONSOLE_LEVELS, isCodeModeErrorCode } from "@codecell/contract/errors";
// The plain-cell test only: the parser (acorn) is loaded on the first cell that needs it.
import { isPlainJavaScriptCell } from "@codecell/transpile/plain-cell";
import { JSException, JSValueHandle, QuickJS } from "quickjs-wasi";
import { compileGuestPrelude, GUEST_PRELUDE_SOURCE } from "./guest-prelude.js";
import { runVmOptions, VM_STACK_BYTES, VmImage } from "./vm-image.js";
import { VmStrings } from "./vm-strings.js";

/** The one host function; its name is baked into snapshots, so it must never change. */
const HOST_FUNCTION_NAME = "codecellHost";
/** Largest JSON body of one host request (tool input). */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** The cell is the body of an async function; the opening stays on line 1 so line numbers hold. */
const CELL_PREFIX = "(async function () {";
const CELL_FILENAME = "cell.js";
/**
 * Codes the prelude raises on its own (a bad `API.read` path). Every other code a guest error may carry
 * must first have been handed to this run by the worker or the host (see GuestRun.issuedCodes).
 */
const PRELUDE_CODES = ["invalid_input"];
/**
 * Messages QuickJS gives the RangeError it throws when a string or array would pass the engine's size
 * limits; the guest-visible sign that a cell built a value too large, like running out of memory.
 */
const ENGINE_SIZE_LIMIT_MESSAGES = new Set(["string too long", "invalid string length", "out of memory"]);
/** How long requests may wait in the outbox for the end of the drain. */
const OUTBOX_HOLD_MS = 1;
/** A run idle this long is waiting on slow host work: time to do the worker's own chores. */
const IDLE_WORK_AFTER_MS = 2;
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
/** Messages the worker may hand over through the shared channel: plain JSON data, no transfers. */
const SHARED_CHANNEL_TYPES = new Set(["started", "request", "idle", "completed", "failed", "batch"]);
/**
 * The messages of a quick call, kept for the worker's life in the shapes they arrive in: a settle parsed
 * from JSON (the shared channel) and one structured-cloned (the port), which give its items different
 * hidden classes (maps), and a tool call's request body as the guest's JSON makes it and onRequest gives
 * it its id. V8 frees the map of a shape that has no object left at a full garbage collection, and
 * drops the optimized code that checks for it. These objects are handled and let go within a call, so
 * at a collection none is usually alive, and the worker's first full collection used to throw away the
 * optimized code of its answer path (serveWaitingRuns, the message checks, onRequest) in the middle of a
 * loop of calls. Held on the global under a symbol of its own, so neither the bundler nor V8 drops them
 * as unused; guest code never sees this global.
 */
{
  const settle = {
    type: "settle",
    runId: "",
    items: [{ requestId: "", ok: true, json: "", shallow: false }],
    deadlineAt: 0.5,
  };
  const callBody = JSON.parse('{"kind":"call","target":"","input":{}}');
  callBody.requestId = "";
  Object.defineProperty(globalThis, Symbol("codecell.messageShapes"), {
    value: [JSON.parse(JSON.stringify(settle)), structuredClone(settle), callBody],
  });
}
/** What a report carries when there is nothing to list (shared: a structured clone copies it anyway). */
const NOTHING = /** @type {any[]} */ (/** @type {unknown} */ (Object.freeze([])));

if (parentPort === null) throw new Error("sandbox-worker.js must run as a worker thread");
const port = parentPort;

/** @type {import("quickjs-wasi").QuickJSOptions["wasm"] | null} */
let wasmModule = null;
/** @type {string | null} */
let snapshotSecret = null;
/** The host's doorbell (init): its count goes up after every message the host posts. */
/** @type {Int32Array | null} */
let doorbell = null;
/** The host's shared channel of this worker (init; see @codecell/bridge shared-channel). */
/** @type {SharedChannel | null} */
let channel = null;
/**
 * The prelude's bytecode, evaluated into every VM (evaluating bytecode skips parsing the prelude for
 * each VM). Only our own bytes reach QuickJS's bytecode reader: either the bytecode our build compiled
 * and this package ships, which the host hands over in `init` after checking its hashes against the
 * wasm it runs and which is taken only when it was compiled from exactly this worker's prelude source
 * (see src/prelude-bytecode.ts), or, failing that, bytecode this worker compiles itself from that
 * source, in the throwaway VM of `init` that no guest code ever touches.
 * @type {Uint8Array | null}
 */
let preludeBytecode = null;

/**
 * Compiling in a VM of its own keeps the compiler's garbage out of the runs' heaps (the first run's
 * snapshot was 12 KB larger when it did).
 * @param {QuickJS} vm
 */
function compilePrelude(vm) {
  preludeBytecode ??= compileGuestPrelude(vm);
  return preludeBytecode;
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
  if (preludeBytecode !== null || shipped == null || shipped.source !== GUEST_PRELUDE_SOURCE) return;
  preludeBytecode = shipped.bytecode;
  const image = shipped.image === undefined ? null : VmImage.deserialize(shipped.image, takeEntropy);
  if (image !== null && !freshImages.has(image.memoryLimit)) {
    freshImages.set(image.memoryLimit, { image: image.image, preludePointer: image.preludePointer });
  }
}

function throwawayVm() {
  return QuickJS.create({
    wasm: /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (wasmModule),
    maxStackSize: VM_STACK_BYTES,
    wasi: silentWasi,
  });
}

async function compilePreludeAside() {
  const vm = await throwawayVm();
  try {
    return compilePrelude(vm);
  } finally {
    dropVm(vm);
  }
}
/**
 * The snapshot codec (zlib and crypto) is loaded on first use, so a worker's start-up does not pay
 * for it; a run that goes idle starts loading it in the background, since a suspend may follow.
 * @type {Promise<typeof import("./snapshot-codec.js")> | null}
 */
let snapshotCodec = null;
function loadSnapshotCodec() {
  snapshotCodec ??= import("./snapshot-codec.js");
  return snapshotCodec;
}
/**
 * The cell checker and TypeScript stripper (acorn, and sucrase on the first TypeScript cell), run here,
 * off the host's event loop. Loaded on the first cell that is not plain (see GuestRun.start): most
 * cells never need it, and a worker that loads it costs its start-up CPU and memory.
 * @type {Promise<typeof import("@codecell/transpile")> | null}
 */
let transpile = null;
function loadTranspile() {
  transpile ??= import("@codecell/transpile");
  return transpile;
}
/** @type {Map<string, GuestRun>} */
const runs = new Map();

/**
 * Send a message to the host: handed over through the shared channel when the host is spinning for it
 * (it just sent this worker a result) and it fits, else posted on the port.
 * @param {import("@codecell/bridge").WorkerToHostMessage} message @param {ArrayBuffer[]} [transfer]
 * @param {boolean} [small] false when the message is known to carry more text than the slot holds (it
 * is not encoded for the slot only to be refused there)
 */
function post(message, transfer, small = true) {
  const shared = channel;
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

/** @param {string} level @returns {level is import("@codecell/contract").ConsoleLevel} */
function isConsoleLevel(level) {
  return /** @type {readonly string[]} */ (CONSOLE_LEVELS).includes(level);
}

/** @param {string} text */
function byteLength(text) {
  return Buffer.byteLength(text, "utf8");
}

/**
 * WASI fd_write: the guest must never reach host stdout or stderr. Report every byte as written so
 * libc does not retry, and drop them.
 * @param {{ buffer: ArrayBuffer }} memory
 */
function silentWasi(memory) {
  return {
    /** @param {number} pointer @param {number} length */
    random_get(pointer, length) {
      takeEntropy(new Uint8Array(memory.buffer, pointer, length));
      return 0;
    },
    /** @param {number} _fd @param {number} iovs @param {number} count @param {number} writtenPtr */
    fd_write(_fd, iovs, count, writtenPtr) {
      const view = new DataView(memory.buffer);
      let total = 0;
      for (let index = 0; index < count; index++) total += view.getUint32(iovs + index * 8 + 4, true);
      view.setUint32(writtenPtr, total, true);
      return 0;
    },
  };
}

/**
 * Random bytes for this worker's VMs, each used once, and how many are used: first the host's (`init`'s
 * `entropy`: in a fresh worker thread Web Crypto's first use loads its modules, tens of ms, and QuickJS's
 * libc asks for 4 bytes as each VM is made, the first one included), then refilled from Web Crypto a
 * pool at a time (a call for each VM's 4 bytes cost about 10 µs, 1% of a trivial cell).
 * @type {Uint8Array | null}
 */
let entropy = null;
let entropyUsed = 0;
const ENTROPY_POOL_BYTES = 4096;

/** @param {Uint8Array} target */
function takeEntropy(target) {
  if (target.length > ENTROPY_POOL_BYTES) {
    crypto.getRandomValues(target);
    return;
  }
  if (entropy === null || entropy.length - entropyUsed < target.length) {
    entropy = crypto.getRandomValues(new Uint8Array(ENTROPY_POOL_BYTES));
    entropyUsed = 0;
  }
  const taken = entropy.subarray(entropyUsed, entropyUsed + target.length);
  target.set(taken);
  taken.fill(0);
  entropyUsed += target.length;
}

/** @param {string} text @param {number} max */
function clip(text, max) {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** @param {{ name: string, message: string, stack?: string }} data */
function describeGuestError(data) {
  let text = `${data.name}: ${data.message}`;
  const where = typeof data.stack === "string" ? /cell\.js:(\d+):(\d+)/.exec(data.stack) : null;
  if (where) {
    const line = Number(where[1]);
    const column = line === 1 ? Math.max(1, Number(where[2]) - CELL_PREFIX.length) : Number(where[2]);
    text += ` (line ${line}, column ${column})`;
  }
  return text;
}

/**
 * The size a dropped VM's linear memory is grown to as it is let go (see dropVm): 4 MB, so that V8's
 * 64 MB external-memory step comes after about 20 dropped VMs. Each full collection of this worker's
 * heap costs CPU (V8's helpers, and the worker's optimised code that held the dead VM is compiled again),
 * so a larger size (fewer dead VMs at a time) costs trivial cells more: at 6 MB C5 (4 trivial cells at
 * once) fell from 1.40-1.45x to 0.87-1.01x the floor in the quiet bench, at 4 MB to 1.20-1.28x, for a
 * peak RSS of 100 C1 of 1.16-1.18x, 1.22-1.23x and 1.23-1.29x without (the sandbox README).
 */
const DROPPED_MEMORY_BYTES = 4 * 1024 * 1024;
const WASM_PAGE_BYTES = 64 * 1024;

/**
 * Dispose of a VM so that V8 frees its linear memory soon.
 *
 * A VM's linear memory (a fresh VM with the prelude touches about 0.3 MB of its 1.2 MB) is freed only
 * when V8 collects the wasm instance, and V8 allocates instances in the old generation, so only a
 * full collection of this worker's heap frees it. V8 starts one when the old generation has grown
 * enough, or when array buffers (a wasm memory counts at its byte length) have grown by 64 MB since
 * the last one. A VM adds little to this worker's heap (see the export filter in wasm-module.ts), so
 * in a loop of trivial cells 50-60 dropped VMs, 15-19 MB resident, waited for a collection. Growing a
 * dropped memory maps address space that nothing ever touches (no resident memory, no page faults;
 * the instance is disposed, so no code runs in it again) and counts towards that 64 MB, so a full
 * collection comes after about 20 dropped VMs (issue 18's peak RSS; the sandbox README has figures).
 * A memory that cannot grow (address space refused) is dropped as it is.
 * @param {QuickJS} vm
 */
function dropVm(vm) {
  /** The VM's `WebAssembly.Memory` (this project's lib has no WebAssembly types). */
  /** @type {{ buffer: ArrayBuffer, grow(pages: number): number } | null} */
  let memory = null;
  try {
    memory = vm._getExports()?.memory ?? null;
  } catch {
    // A VM already disposed has no exports; there is nothing left to account for.
  }
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
const spareVms = new Map();
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
function recycleVm(owned, memoryLimit) {
  const fresh = owned.image;
  const kept = recycledVms.get(memoryLimit) ?? [];
  const wanted = Math.min(MAX_RECYCLED_PER_LIMIT, runs.size + 1);
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
function trimRecycledVms() {
  if (runs.size > 0) return;
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
function createOwnedVm(memoryLimit, withPrelude = true) {
  const kept = withPrelude && preludeBytecode !== null ? recycledVms.get(memoryLimit) : undefined;
  const recycled = kept?.pop();
  if (kept?.length === 0) recycledVms.delete(memoryLimit);
  if (recycled !== undefined) return Promise.resolve(recycled);
  /** @type {{ run: GuestRun | null }} */
  const owner = { run: null };
  const options = runVmOptions(
    /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (wasmModule),
    memoryLimit,
    () => owner.run?.shouldInterrupt() === true,
    silentWasi,
  );
  const fresh = withPrelude && preludeBytecode !== null ? freshImages.get(memoryLimit) : undefined;
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
function noteStartSurface(surface, memoryLimit) {
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
    recentSurfaceStarts >= 2 && recentSurfaceLimit === memoryLimit && runs.size === 0 ? recentSurface : null;
  const plain = createOwnedVm(memoryLimit);
  const spare = surface === null ? plain : plain.then((owned) => applySurface(owned, surface, memoryLimit));
  spare.catch(() => spareVms.delete(memoryLimit));
  spareVms.set(memoryLimit, spare);
}

/** Run operations (start, settle, restore, suspend) in progress on this worker. */
let operationsInFlight = 0;
/** @type {Set<number>} memory limits wanting a spare once the worker is free */
const sparesWanted = new Set();

/**
 * Ask for a spare VM. It is built when no run operation is in progress, so it never sits between a
 * run's message and its answer (a restore or a quick settle arriving meanwhile goes first).
 * @param {number} memoryLimit
 */
function wantSpare(memoryLimit) {
  sparesWanted.add(memoryLimit);
  setImmediate(buildWantedSpares);
}

function buildWantedSpares() {
  if (operationsInFlight > 0) return;
  for (const limit of sparesWanted) prepareSpare(limit);
  sparesWanted.clear();
}

/**
 * A fresh VM for a run: the spare when there is one that fits (a spare applied to another surface is
 * dropped; the run gets a plain VM).
 * @param {GuestRun} run @param {string} surface
 */
async function takeFreshVm(run, surface) {
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

class GuestRun {
  /**
   * @param {string} runId
   * @param {import("@codecell/bridge").SandboxLimits} limits
   * @param {number} deadlineAt
   * @param {Int32Array} signal
   */
  constructor(runId, limits, deadlineAt, signal) {
    this.runId = runId;
    this.limits = limits;
    this.deadlineAt = deadlineAt;
    /** The cell's own budget when its clock starts in this worker (start with timeoutMs). */
    /** @type {number | null} */
    this.timeoutMs = null;
    this.signal = signal;
    /** @type {QuickJS | null} */
    this.vm = null;
    /** @type {import("quickjs-wasi").JSValueHandle | null} */
    this.control = null;
    /** The VM as takeFreshVm handed it over, for recycleVm when the run ends (null after a restore). */
    /** @type {OwnedVm | null} */
    this.owned = null;
    /**
     * Strings this run passes into the VM again and again, made on first use: the fixed arguments of
     * every settle call into the prelude (see deliver) and the empty reply of the host function.
     * @type {{ op: import("quickjs-wasi").JSValueHandle, ok: import("quickjs-wasi").JSValueHandle, failed: import("quickjs-wasi").JSValueHandle, empty: import("quickjs-wasi").JSValueHandle } | null}
     */
    this.fixedStrings = null;
    /** The short way for a call's strings into and out of this run's VM (see vmStrings). */
    /** @type {VmStrings | null} */
    this.strings = null;
    /**
     * quickjs-wasi takes its own reference to whatever a host callback returns and leaves the returned
     * handle to the callback: a reply never freed here would stay in the VM's heap for the rest of the
     * run (a long loop of calls ran a small VM out of memory). The last one-off reply (a refusal) is
     * freed at the next host call; a request's id is kept until its result is delivered, which passes
     * the same string back into the VM instead of making it again.
     * @type {import("quickjs-wasi").JSValueHandle | null}
     */
    this.lastReply = null;
    /** @type {Map<string, import("quickjs-wasi").JSValueHandle>} */
    this.requestIdHandles = new Map();
    /**
     * Whether the guest knows its requests by number (request "r7" is 7) rather than by the id string.
     * A VM restored from a snapshot taken before numbers were used (its bridge state does not say
     * `numericIds`) keeps strings: its prelude has its pending calls filed under them.
     */
    this.numericIds = true;
    this.controlToken = 0;
    /** @type {Map<string, import("@codecell/bridge").HostRequest>} */
    this.pending = new Map();
    /** A restored run's first idle lists its pending requests: the host has no request messages of them. */
    this.announcePending = false;
    /** How many pending requests are tool calls (they count toward maxPendingToolCalls). */
    this.pendingToolCalls = 0;
    this.nextRequestNumber = 0;
    this.outputBytes = 0;
    /**
     * The codes this run's guest has been handed inside errors (refusals, failed host results). An
     * uncaught guest error fails the run with its code only when the code is in this set: a guest can
     * pass on a code it was given, never invent one (a forged `timeout` or `memory_limit_exceeded`).
     * @type {Set<string>}
     */
    this.issuedCodes = new Set(PRELUDE_CODES);
    /** @type {import("@codecell/contract").CodeModeOutput[]} */
    this.output = [];
    /** @type {{ type: "completed", value: unknown } | { type: "failed", code: string | null, message: string, error: unknown } | null} */
    this.outcome = null;
    /** A failure decided by the host side (limits, deadline, abort): the interrupt handler enforces it. */
    /** @type {{ code: import("@codecell/contract").CodeModeErrorCode, message: string } | null} */
    this.forced = null;
    this.finished = false;
    /**
     * Requests issued during a short drain wait here and leave with the state message that ends the
     * drain: one message per round trip instead of two (an idle carries them itself). A drain that runs
     * long sends them at once so the host can start work in parallel.
     * One array for the run (flushOutbox empties it), holding references from the start.
     * @type {import("@codecell/bridge").HostRequest[]}
     */
    this.outbox = emptyReferenceArray();
    /**
     * About how much text the outbox's requests, and the output and returned value not yet reported,
     * carry (UTF-16 units): a message that cannot fit the shared channel's slot is not encoded for it.
     */
    this.outboxChars = 0;
    this.unreportedChars = 0;
    this.reportChars = 0;
    // Times (performance.now()): doubles from the start (see DOUBLE_ZERO of @codecell/bridge).
    this.commandStartedAt = DOUBLE_ZERO;
    /** The idle-work timer (scheduleIdleWork) and the idle period it watches. */
    /** @type {NodeJS.Timeout | null} */
    this.idleTimer = null;
    this.idleSince = DOUBLE_ZERO;
    /** The commandStartedAt of the last idle report (NaN before the first: equal to none). */
    this.idleSinceCommand = Number.NaN;
    /** Serializes this run's operations: a start awaits VM creation while other messages arrive. */
    /** @type {Promise<void>} */
    this.queue = Promise.resolve();
    /** Operations of this run running or waiting in `queue`. */
    this.operationsQueued = 0;
  }

  /** @param {() => Promise<void> | void} operation */
  enqueue(operation) {
    operationsInFlight += 1;
    this.operationsQueued += 1;
    if (this.operationsQueued === 1) {
      // Nothing of this run is running or waiting (the usual settle of a loop of host calls): run it
      // now, rather than three promise turns later.
      let result;
      try {
        result = this.runOperation(operation);
      } catch (error) {
        this.crash(error);
      }
      if (result instanceof Promise) {
        this.queue = result.catch((error) => this.crash(error)).finally(() => this.operationDone());
      } else {
        this.operationDone();
      }
      return;
    }
    this.queue = this.queue
      .then(() => this.runOperation(operation))
      .catch((error) => this.crash(error))
      .finally(() => this.operationDone());
  }

  /** @param {() => Promise<void> | void} operation */
  runOperation(operation) {
    if (this.finished) return undefined;
    this.commandStartedAt = performance.now();
    return operation();
  }

  operationDone() {
    this.operationsQueued -= 1;
    operationsInFlight -= 1;
    if (operationsInFlight === 0 && sparesWanted.size > 0) setImmediate(buildWantedSpares);
  }

  /** @param {import("@codecell/contract").CodeModeErrorCode} code @param {string} message */
  force(code, message) {
    if (this.forced === null) this.forced = { code, message };
  }

  shouldInterrupt() {
    if (this.forced !== null) return true;
    if (Atomics.load(this.signal, 0) !== 0) {
      this.force("aborted", "The run was aborted by its caller.");
      return true;
    }
    if (Date.now() >= this.deadlineAt) {
      const budget = this.timeoutMs === null ? "its deadline" : `its ${this.timeoutMs} ms deadline`;
      this.force(
        "timeout",
        `The cell ran past ${budget} (timeoutMs) and was stopped. Do less in one exec (split the work over several cells, or page and filter it); a loop that never ends is stopped the same way.`,
      );
      return true;
    }
    return false;
  }

  vmOptions() {
    return runVmOptions(
      /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (wasmModule),
      this.limits.memoryLimitBytes,
      () => this.shouldInterrupt(),
      silentWasi,
    );
  }

  /** @param {import("quickjs-wasi").JSValueHandle[]} args */
  hostCall(args) {
    // The previous reply has been handed to the guest (the library holds its own reference).
    this.lastReply?.dispose();
    this.lastReply = null;
    // A request is the one call with a single argument (see the prelude's host protocol): reading the
    // op string out of the VM would cost more than the rest of the call's bookkeeping here.
    if (args.length === 1) {
      const body = /** @type {import("quickjs-wasi").JSValueHandle} */ (args[0]);
      return this.requestReply(this.onRequest(this.vmStrings().read(body)));
    }
    // Read in place (VmStrings), not through the library's toString, which allocates and frees a length
    // word in the VM and decodes a copy: a cell's `done`, and every console line, come this way.
    const strings = this.vmStrings();
    /** @param {number} index */
    const text = (index) => {
      const handle = args[index];
      return handle === undefined ? undefined : strings.read(handle);
    };
    const op = text(0);
    let reply = "";
    if (op === "request") {
      // A prelude from a snapshot taken before the one-argument form.
      return this.requestReply(this.onRequest(text(1) ?? ""));
    }
    if (op === "output") reply = this.onOutput(text(1) ?? "", text(2) ?? "", text(3));
    else if (op === "done") this.onDone(text(1) ?? "null");
    else if (op === "fail") this.onFail(text(1) ?? "{}");
    if (reply === "") return this.heldStrings().empty;
    this.lastReply = strings.newString(reply);
    return this.lastReply;
  }

  /**
   * The guest's answer to a request: its number (a number costs one call into the VM to make, a string
   * several), kept until the result is delivered, which passes the same value back; or the refusal.
   * @param {{ requestId: string, number: number } | string} outcome
   */
  requestReply(outcome) {
    if (typeof outcome === "string") {
      this.lastReply = this.vmStrings().newString(outcome);
      return this.lastReply;
    }
    const id = this.newRequestId(outcome.requestId);
    this.requestIdHandles.set(outcome.requestId, id);
    return id;
  }

  /** The guest's value for a request id: see numericIds. @param {string} requestId */
  newRequestId(requestId) {
    const vm = /** @type {QuickJS} */ (this.vm);
    return this.numericIds ? vm.newNumber(Number(requestId.slice(1))) : vm.newString(requestId);
  }

  /** @param {string} name @param {string} message @param {import("@codecell/contract").CodeModeErrorCode} code */
  refusal(name, message, code) {
    this.issuedCodes.add(code);
    return JSON.stringify({ error: { name, message, code } });
  }

  /**
   * A value leaving the guest as JSON text crosses to the host as a structured clone, whose reader
   * fails (unattributably) on deep nesting: refuse it here, in the worker, with a clear message.
   * @param {string} text @param {string} what
   */
  tooDeep(text, what) {
    if (!exceedsJsonDepth(text, MAX_BRIDGE_DEPTH)) return null;
    return `${what} nests objects and arrays more than ${MAX_BRIDGE_DEPTH} levels deep, the sandbox bridge limit; flatten it (or send it as a string) before it crosses.`;
  }

  /**
   * @param {string} bodyText
   * @returns {{ requestId: string, number: number } | string} the new request, or a refusal (JSON)
   */
  onRequest(bodyText) {
    if (this.forced !== null) return this.refusal("CodeModeError", this.forced.message, this.forced.code);
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a short body needs no count.
    const bytes = bodyText.length * 3 <= MAX_REQUEST_BYTES ? 0 : byteLength(bodyText);
    if (bytes > MAX_REQUEST_BYTES) {
      return this.refusal(
        "CodeModeError",
        `The tool input is ${bytes} bytes of JSON, over the ${MAX_REQUEST_BYTES} byte bridge limit; send less data per call.`,
        "invalid_input",
      );
    }
    const deep = this.tooDeep(bodyText, "The tool input");
    if (deep !== null) return this.refusal("CodeModeError", deep, "invalid_input");
    let body;
    try {
      body = parseHostRequestBody(JSON.parse(bodyText));
    } catch (error) {
      return this.refusal(
        "TypeError",
        `Invalid host call: ${/** @type {Error} */ (error).message}`,
        "invalid_input",
      );
    }
    const toolCall = takesToolCallSlot(body);
    if (toolCall) {
      const refusal = this.tooManyToolCalls();
      if (refusal !== null) return refusal;
    }
    this.nextRequestNumber += 1;
    const number = this.nextRequestNumber;
    const requestId = `r${number}`;
    // The body is a fresh object of JSON.parse's: it becomes the request itself (no copy).
    const request = /** @type {import("@codecell/bridge").HostRequest} */ (body);
    request.requestId = requestId;
    this.pending.set(requestId, request);
    if (toolCall) this.pendingToolCalls += 1;
    this.outbox.push(request);
    this.outboxChars += bodyText.length;
    if (performance.now() - this.commandStartedAt > OUTBOX_HOLD_MS) this.flushOutbox();
    return { requestId, number };
  }

  /**
   * The host runs maxPendingToolCalls tool calls at once and queues up to maxQueuedToolCalls more in
   * order; only a call past both is refused. Searches, describes and yields are not counted.
   * @returns {string | null} a refusal for the guest to throw, or null
   */
  tooManyToolCalls() {
    const running = this.limits.maxPendingToolCalls;
    const queued = this.limits.maxQueuedToolCalls ?? 0;
    if (this.pendingToolCalls < running + queued) return null;
    const message =
      queued === 0
        ? `Too many tool calls in flight: ${this.pendingToolCalls} are pending and maxPendingToolCalls is ${running} (with maxQueuedToolCalls 0, none may wait for a slot). Await some calls before starting more.`
        : `Too many tool calls waiting: ${running} run at once (maxPendingToolCalls) and ${queued} more are queued, the most maxQueuedToolCalls allows. Await some calls before starting more, or work in batches.`;
    return this.refusal("CodeModeError", message, "too_many_pending_tool_calls");
  }

  /** @param {string} requestId @returns {boolean} whether it was pending */
  forgetPending(requestId) {
    const request = this.pending.get(requestId);
    if (request === undefined) return false;
    this.pending.delete(requestId);
    if (takesToolCallSlot(request)) this.pendingToolCalls -= 1;
    return true;
  }

  /** @param {number} bytes @param {string} what */
  chargeOutput(bytes, what) {
    if (this.outputBytes + bytes > this.limits.maxOutputBytes) {
      this.force(
        "output_limit_exceeded",
        `Output limit exceeded: ${what} would bring the run to ${this.outputBytes + bytes} bytes, over maxOutputBytes ${this.limits.maxOutputBytes}. Return less (summarize, filter or page).`,
      );
      return false;
    }
    this.outputBytes += bytes;
    this.unreportedChars += bytes;
    return true;
  }

  /**
   * @param {string} kind @param {string} text @param {string} [level] console level, for console.*
   * @returns {string} "" or a refusal for the guest to throw
   */
  onOutput(kind, text, level) {
    // Work the cell left running after it returned may still add output until it settles.
    if (this.forced !== null || (this.outcome !== null && this.outcome.type !== "completed")) return "";
    if (kind !== "text") {
      const deep = this.tooDeep(text, "The json() value");
      if (deep !== null) return this.refusal("CodeModeError", deep, "invalid_input");
    }
    const consoleLevel = level !== undefined && isConsoleLevel(level) ? level : null;
    const what = consoleLevel ? `console.${consoleLevel}()` : kind === "text" ? "text()" : "json()";
    if (!this.chargeOutput(byteLength(text), what)) return "";
    if (kind !== "text") this.output.push({ type: "json", value: JSON.parse(text) });
    else
      this.output.push(consoleLevel ? { type: "text", text, level: consoleLevel } : { type: "text", text });
    return "";
  }

  /** @param {string} text */
  onDone(text) {
    if (this.forced !== null || this.outcome !== null) return;
    const deep = this.tooDeep(text, "The returned value");
    if (deep !== null) {
      this.outcome = {
        type: "failed",
        code: "invalid_input",
        message: deep,
        error: { name: "CodeModeError", message: deep, code: "invalid_input" },
      };
      return;
    }
    if (!this.chargeOutput(byteLength(text), "the returned value")) return;
    this.outcome = { type: "completed", value: JSON.parse(text) };
  }

  /** @param {string} text */
  onFail(text) {
    if (this.forced !== null || this.outcome !== null) return;
    const data = JSON.parse(text);
    // A guest can throw a message of many megabytes; only a bounded description crosses to the host.
    data.name = clip(String(data.name), MAX_ERROR_NAME_LENGTH);
    data.message = clip(String(data.message), MAX_ERROR_MESSAGE_LENGTH);
    data.stack = clip(String(data.stack ?? ""), MAX_ERROR_MESSAGE_LENGTH);
    if (
      (data.name === "RangeError" || data.name === "InternalError") &&
      ENGINE_SIZE_LIMIT_MESSAGES.has(data.message)
    ) {
      // The engine refused to build a string or array that large: a memory limit the model must
      // know about, not a bug in its code. (A guest that throws this exact error itself gains
      // nothing: it could reach the limit for real just as fast.)
      const message = `The cell built a value larger than the engine allows (${data.name}: ${data.message}). Work on less data at once (page, filter or summarize).`;
      this.outcome = {
        type: "failed",
        code: "memory_limit_exceeded",
        message: `${describeGuestError(data)}: ${message}`,
        error: { name: data.name, message: data.message, code: "memory_limit_exceeded" },
      };
      return;
    }
    const code = isCodeModeErrorCode(data.code) && this.issuedCodes.has(data.code) ? data.code : null;
    /** @type {{ name: string, message: string, code?: string }} */
    const error = { name: String(data.name), message: String(data.message) };
    if (code !== null) error.code = code;
    this.outcome = { type: "failed", code, message: describeGuestError(data), error };
  }

  registerHost() {
    return (/** @type {import("quickjs-wasi").JSValueHandle[]} */ ...args) => this.hostCall(args);
  }

  /**
   * Check the cell (module access, syntax) and strip TypeScript types. A refusal becomes the run's
   * outcome with the transpiler's code (module_access_denied, invalid_input, typescript_transform_failed).
   * @param {string} source @param {import("@codecell/contract").CodeModeLanguage} language
   * @returns {Promise<string | null>}
   */
  async prepare(source, language) {
    try {
      const { prepareCell } = await loadTranspile();
      return await prepareCell(source, language);
    } catch (error) {
      const failure = /** @type {{ code?: unknown, message?: unknown }} */ (error ?? {});
      const code = isCodeModeErrorCode(failure.code) ? failure.code : "internal_error";
      const message =
        code === "internal_error"
          ? `The cell could not be prepared: ${String(failure.message ?? error)}`
          : String(failure.message);
      this.outcome = { type: "failed", code, message, error: null };
      return null;
    }
  }

  /** @param {string} surface @param {string} source @param {import("@codecell/contract").CodeModeLanguage} language */
  async start(surface, source, language) {
    // A plain cell (no module word, nothing that could close the function it is the body of) skips
    // the parser: compiling it below is its syntax check, and the parser words the error if that fails.
    const plain = language === "javascript" && isPlainJavaScriptCell(source);
    const code = plain ? source : await this.prepare(source, language);
    if (code === null) return this.report();
    // Compiled at init; compiled aside here only if that failed (this throws what went wrong).
    const bytecode = preludeBytecode ?? (await compilePreludeAside());
    const owned = await takeFreshVm(this, surface);
    const vm = owned.vm;
    this.vm = vm;
    this.owned = owned;
    if (this.finished) return this.release();
    if (owned.control !== null) {
      // The spare ran the prelude with this very surface: point its host function at this run.
      vm.registerHostCallback(HOST_FUNCTION_NAME, this.registerHost());
      this.control = owned.control;
    } else {
      const host = vm.newFunction(HOST_FUNCTION_NAME, this.registerHost());
      const prelude = owned.prelude ?? vm.evalBytecode(bytecode);
      const surfaceHandle = this.vmStrings().newString(surface);
      this.control = vm.callFunction(prelude, vm.undefined, host, surfaceHandle);
      surfaceHandle.dispose();
      prelude.dispose();
      host.dispose();
    }
    this.controlToken = vm.exportHandle(this.control);

    if (this.timeoutMs !== null) {
      this.deadlineAt = Date.now() + this.timeoutMs;
      post({ type: "started", runId: this.runId, deadlineAt: this.deadlineAt });
    }
    let cell;
    try {
      cell = vm.evalCode(`${CELL_PREFIX}${code}\n})`, CELL_FILENAME);
    } catch (error) {
      // A plain cell that does not compile gets the parser's verdict, as every cell did before it ran:
      // the same `invalid_input` message, line and column a checked cell gets.
      if (plain && error instanceof JSException && this.forced === null) {
        if ((await this.prepare(source, language)) === null) {
          error.dispose();
          return this.report();
        }
      }
      if (error instanceof JSException && error.name === "SyntaxError" && this.forced === null) {
        const data = { name: error.name, message: error.message, stack: error.stack ?? "" };
        this.outcome = {
          type: "failed",
          code: "invalid_input",
          message: `The cell does not parse: ${describeGuestError(data)}`,
          error: { name: "SyntaxError", message: error.message, code: "invalid_input" },
        };
        error.dispose();
        return this.report();
      }
      throw error;
    }
    this.call("start", cell);
    cell.dispose();
    this.drain();
    this.report();
  }

  /** @param {string} op @param {...(import("quickjs-wasi").JSValueHandle | string)} args */
  call(op, ...args) {
    const vm = /** @type {QuickJS} */ (this.vm);
    const strings = this.vmStrings();
    const handles = [
      strings.newString(op),
      ...args.map((arg) => (typeof arg === "string" ? strings.newString(arg) : arg)),
    ];
    const result = vm.callFunction(
      /** @type {import("quickjs-wasi").JSValueHandle} */ (this.control),
      vm.undefined,
      ...handles,
    );
    const reply = strings.read(result);
    result.dispose();
    for (let index = 0; index < handles.length; index++) {
      const handle = /** @type {import("quickjs-wasi").JSValueHandle} */ (handles[index]);
      if (index === 0 || typeof args[index - 1] === "string") handle.dispose();
    }
    return reply;
  }

  vmStrings() {
    this.strings ??= new VmStrings(/** @type {QuickJS} */ (this.vm));
    return this.strings;
  }

  heldStrings() {
    if (this.fixedStrings === null) {
      const strings = this.vmStrings();
      this.fixedStrings = {
        op: strings.newString("settle"),
        ok: strings.newString("1"),
        failed: strings.newString("0"),
        empty: strings.newString(""),
      };
    }
    return this.fixedStrings;
  }

  /**
   * Hand one result to the prelude: control("settle", id, "1" | "0", json). The fixed arguments are made
   * once per VM, the id is the value the request returned to the guest (made again only for a restored
   * run's requests), and the prelude's reply is not read: a result costs one string into the VM.
   * @param {string} requestId @param {boolean} ok @param {string} json
   */
  deliver(requestId, ok, json) {
    const vm = /** @type {QuickJS} */ (this.vm);
    const args = this.heldStrings();
    const kept = this.requestIdHandles.get(requestId);
    if (kept !== undefined) this.requestIdHandles.delete(requestId);
    const id = kept ?? this.newRequestId(requestId);
    /** @type {import("quickjs-wasi").JSValueHandle | null} */
    let text = null;
    try {
      text = this.vmStrings().newString(json);
      vm.callFunction(
        /** @type {import("quickjs-wasi").JSValueHandle} */ (this.control),
        vm.undefined,
        args.op,
        id,
        ok ? args.ok : args.failed,
        text,
      ).dispose();
    } finally {
      id.dispose();
      text?.dispose();
    }
  }

  /**
   * Free every string this run holds in the VM (before a snapshot, so the image carries none of them;
   * a run that stays live makes them again as needed).
   */
  dropHeldStrings() {
    const held = this.fixedStrings;
    const lastReply = this.lastReply;
    const ids = [...this.requestIdHandles.values()];
    this.fixedStrings = null;
    this.lastReply = null;
    this.requestIdHandles.clear();
    if (held !== null) {
      held.op.dispose();
      held.ok.dispose();
      held.failed.dispose();
      held.empty.dispose();
    }
    lastReply?.dispose();
    for (const id of ids) id.dispose();
    this.strings?.release();
  }

  /**
   * Run the guest's promise jobs until none is left (executePendingJobs loops until the queue is empty,
   * jobs queued by jobs included). A cell that keeps queueing jobs without end is stopped by the
   * interrupt handler at its deadline, like any other endless loop.
   */
  drain() {
    /** @type {QuickJS} */ (this.vm).executePendingJobs();
  }

  /** @param {import("@codecell/bridge").SettleItem[]} items @param {number} deadlineAt */
  settle(items, deadlineAt) {
    this.deadlineAt = deadlineAt;
    for (const item of items) {
      if (!this.forgetPending(item.requestId)) continue;
      let ok = item.ok;
      let json = item.json;
      // The host marks a result it knows nests far less than the bridge limit (see SettleItem).
      if (ok && item.shallow !== true) {
        const deep = this.tooDeep(json, "The tool result");
        if (deep !== null) {
          ok = false;
          json = JSON.stringify({ name: "CodeModeError", message: deep, code: "nested_tool_failed" });
        }
      }
      if (!ok) this.noteIssuedCode(json);
      this.deliver(item.requestId, ok, json);
    }
    this.drain();
    this.report();
  }

  /** @param {string} errorJson a failed host result as the guest will see it */
  noteIssuedCode(errorJson) {
    try {
      const code = JSON.parse(errorJson)?.code;
      if (isCodeModeErrorCode(code)) this.issuedCodes.add(code);
    } catch {
      // Not JSON: the prelude fails the settle the same way, and no code is issued.
    }
  }

  /** @param {Uint8Array} snapshot */
  async restore(snapshot) {
    const { decodeSnapshot, SnapshotCodecError } = await loadSnapshotCodec();
    let decoded;
    /** @type {{ controlToken: number, nextRequestNumber: number, outputBytes: number, pending: import("@codecell/bridge").HostRequest[], issuedCodes?: string[] }} */
    let state;
    try {
      decoded = decodeSnapshot(snapshot, snapshotSecret, this.limits.memoryLimitBytes * 2 + 64 * 1024 * 1024);
      state = /** @type {typeof state} */ (decoded.bridgeState);
      if (
        typeof state !== "object" ||
        state === null ||
        !Number.isInteger(state.controlToken) ||
        !Number.isInteger(state.nextRequestNumber) ||
        !Number.isInteger(state.outputBytes) ||
        !Array.isArray(state.pending)
      ) {
        throw new SnapshotCodecError("the snapshot's bridge state is malformed");
      }
      const vm = await QuickJS.restore(QuickJS.deserializeSnapshot(decoded.vmSnapshot), this.vmOptions());
      this.vm = vm;
      if (this.finished) return this.release();
      vm.registerHostCallback(HOST_FUNCTION_NAME, this.registerHost());
      this.control = vm.importHandle(state.controlToken);
      this.controlToken = state.controlToken;
    } catch (error) {
      const reason =
        error instanceof SnapshotCodecError
          ? error.message
          : `QuickJS could not restore it (${String(/** @type {Error} */ (error)?.message ?? error)})`;
      this.outcome = {
        type: "failed",
        code: "snapshot_restore_failed",
        message: `The snapshot cannot be restored: ${reason}.`,
        error: null,
      };
      return this.report();
    }
    this.nextRequestNumber = state.nextRequestNumber;
    this.numericIds = /** @type {{ numericIds?: unknown }} */ (state).numericIds === true;
    this.outputBytes = state.outputBytes;
    const returned = /** @type {{ returned?: { value: unknown } }} */ (state).returned;
    if (returned !== undefined) this.outcome = { type: "completed", value: returned.value };
    this.announcePending = true;
    for (const request of state.pending) {
      this.pending.set(request.requestId, request);
      if (takesToolCallSlot(request)) this.pendingToolCalls += 1;
    }
    if (Array.isArray(state.issuedCodes)) {
      for (const code of state.issuedCodes) if (isCodeModeErrorCode(code)) this.issuedCodes.add(code);
    }
    this.report();
  }

  async suspend() {
    const { encodeSnapshot } = await loadSnapshotCodec();
    const vm = this.vm;
    const failed = this.outcome !== null && this.outcome.type === "failed";
    if (vm === null || failed || this.forced !== null || this.pending.size === 0) {
      post({
        type: "suspend-failed",
        runId: this.runId,
        code: "internal_error",
        message: "The run can only be suspended while it is idle with host calls pending.",
      });
      return;
    }
    this.dropHeldStrings();
    const image = QuickJS.serializeSnapshot(vm.snapshot());
    const bridgeState = {
      controlToken: this.controlToken,
      nextRequestNumber: this.nextRequestNumber,
      numericIds: this.numericIds,
      outputBytes: this.outputBytes,
      pending: [...this.pending.values()],
      issuedCodes: [...this.issuedCodes],
      // The cell already returned this value; it is reported once the pending calls settle.
      ...(this.outcome?.type === "completed" ? { returned: { value: this.outcome.value } } : {}),
    };
    const bytes = encodeSnapshot(image, bridgeState, snapshotSecret);
    if (bytes.byteLength > this.limits.maxSnapshotBytes) {
      post({
        type: "suspend-failed",
        runId: this.runId,
        code: "snapshot_limit_exceeded",
        message: `The suspended VM is ${bytes.byteLength} bytes compressed, over maxSnapshotBytes ${this.limits.maxSnapshotBytes}. Keep less data alive while tool calls are pending; the run stays live.`,
      });
      return;
    }
    post({ type: "suspended", runId: this.runId, snapshot: bytes, pending: bridgeState.pending }, [
      /** @type {ArrayBuffer} */ (bytes.buffer),
    ]);
    this.release();
  }

  /**
   * Send the held requests, and `last` (the state message that ends a drain) after them. An idle
   * carries them in its `requests`: one flat message, cheaper to clone than a batch of a request and
   * an idle (the message of every quick host call). Anything else follows them in one batch.
   * @param {import("@codecell/bridge").WorkerToHostMessage} [last] @param {ArrayBuffer[]} [transfer]
   */
  flushOutbox(last, transfer) {
    const requests = this.outbox;
    const small = this.outboxChars + (last === undefined ? 0 : this.reportChars) < SHARED_SLOT_BYTES;
    this.outboxChars = 0;
    if (last !== undefined) this.reportChars = 0;
    if (requests.length === 0) {
      if (last !== undefined) post(last, transfer, small);
      return;
    }
    // post() copies what it sends before it returns (JSON text for the shared channel, or a structured
    // clone), so the outbox is emptied and kept. A fresh `[]` per drain started with the small-integer
    // elements kind each time, and the first push into it threw the optimized code of onRequest away
    // (deoptimized, "not a Smi"); see emptyReferenceArray.
    try {
      if (last?.type === "idle") {
        // A literal with its requests in it, the same text as before: `requests` added to the idle
        // afterwards gave every such idle a second hidden class, and a property store, on the way out.
        const { runId, pending, output } = last;
        post({ type: "idle", runId, pending, output, requests }, transfer, small);
        return;
      }
      /** @type {import("@codecell/bridge").WorkerToHostMessage[]} */
      const messages = [];
      for (const request of requests) messages.push({ type: "request", runId: this.runId, request });
      if (last !== undefined) messages.push(last);
      if (messages.length === 1) post(/** @type {any} */ (messages[0]), transfer, small);
      else post({ type: "batch", messages }, transfer, small);
    } finally {
      requests.length = 0;
    }
  }

  /**
   * If the host leaves this run idle for a while, prepare for a suspend and for the next run. One timer
   * per run at a time, not one per idle report: a loop of quick host calls goes idle every few tens of
   * microseconds, and a timer for each of them cost more than the calls themselves.
   */
  scheduleIdleWork() {
    const idleFor = this.commandStartedAt;
    this.idleSinceCommand = idleFor;
    this.idleSince = performance.now();
    if (this.idleTimer !== null) return;
    const check = () => {
      this.idleTimer = null;
      // Busy again (a command started after the last idle report): the next idle report re-arms.
      if (this.finished || this.idleSinceCommand !== this.commandStartedAt) return;
      const waited = performance.now() - this.idleSince;
      if (waited < IDLE_WORK_AFTER_MS) {
        this.idleTimer = setTimeout(check, IDLE_WORK_AFTER_MS - waited);
        this.idleTimer.unref();
        return;
      }
      void loadSnapshotCodec().catch(() => {});
      wantSpare(this.limits.memoryLimitBytes);
    };
    this.idleTimer = setTimeout(check, IDLE_WORK_AFTER_MS);
    this.idleTimer.unref();
  }

  takeOutput() {
    // The output (and returned value) charged so far leaves with the report being made.
    this.reportChars += this.unreportedChars;
    this.unreportedChars = 0;
    const output = this.output;
    if (output.length === 0) return NOTHING;
    this.output = [];
    return output;
  }

  report() {
    if (this.finished) return;
    if (this.forced !== null) {
      this.finish({ type: "failed", code: this.forced.code, message: this.forced.message, error: null });
      return;
    }
    // A cell that returned while its calls are still running is not done: those calls keep going and
    // the run completes once they settle (the run stays idle, and can be suspended, until then).
    if (this.outcome !== null && (this.outcome.type === "failed" || this.pending.size === 0)) {
      this.finish(this.outcome);
      return;
    }
    if (this.pending.size > 0) {
      // The host learnt of each request from its request message; only a restored run's first idle
      // lists them (the host has not seen them in this life of the run).
      const pending = this.announcePending ? [...this.pending.values()] : NOTHING;
      this.announcePending = false;
      this.flushOutbox({ type: "idle", runId: this.runId, pending, output: this.takeOutput() });
      this.scheduleIdleWork();
      return;
    }
    this.finish({
      type: "failed",
      code: null,
      message:
        "The cell is waiting on a promise that nothing can settle: no tool call or yield_control() is pending, so it would never finish. Await only promises that tools, namespaces or yield_control() return.",
      error: null,
    });
  }

  /** @param {NonNullable<GuestRun["outcome"]>} outcome */
  finish(outcome) {
    const output = this.takeOutput();
    if (outcome.type === "completed") {
      this.flushOutbox({
        type: "completed",
        runId: this.runId,
        value: /** @type {any} */ (outcome.value),
        output,
      });
    } else {
      this.flushOutbox({
        type: "failed",
        runId: this.runId,
        code: /** @type {any} */ (outcome.code),
        message: outcome.message,
        error: /** @type {any} */ (outcome.error),
        output,
      });
    }
    this.release();
  }

  /** Anything thrown while the VM ran: classify it, discard the VM, report once. */
  /** @param {unknown} error */
  crash(error) {
    if (this.finished) return;
    if (this.forced !== null) {
      this.report();
      return;
    }
    if (error instanceof JSException) {
      if (/out of memory/i.test(error.message)) {
        this.force(
          "memory_limit_exceeded",
          `The cell ran out of memory (memoryLimitBytes ${this.limits.memoryLimitBytes}); the VM was discarded. Work on less data at once.`,
        );
      } else if (/string too long|array too long|too many/i.test(error.message)) {
        // QuickJS raises these size limits as uncatchable errors, like out-of-memory.
        this.force(
          "memory_limit_exceeded",
          `The cell built a value larger than the engine allows (${error.message}); the VM was discarded. Work on less data at once.`,
        );
      } else if (/interrupted/i.test(error.message)) {
        this.force("timeout", "The cell was interrupted.");
      } else {
        this.force(
          "internal_error",
          `The sandbox failed outside guest code: ${error.name}: ${error.message}. The VM was discarded.`,
        );
      }
    } else {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      this.force("internal_error", `The sandbox VM failed (${message}) and was discarded.`);
    }
    this.report();
  }

  release() {
    this.finished = true;
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    runs.delete(this.runId);
    // Build the next fresh VM now that this run is off the thread (from this run's VM when it can be
    // reset, see below: the spare is built after this returns).
    wantSpare(this.limits.memoryLimitBytes);
    imagesWanted = true;
    const vm = this.vm;
    // The strings this run holds in the VM go with it, unfreed: freeing them one by one first was work
    // for a memory that is discarded whole below.
    this.fixedStrings = null;
    this.strings = null;
    this.lastReply = null;
    this.requestIdHandles.clear();
    this.vm = null;
    this.control = null;
    const owned = this.owned;
    this.owned = null;
    // A run that ended on its own gives its VM back, made fresh (recycleVm); one that was forced to end
    // (a timeout, a memory limit, a crash) or that came from a snapshot drops it.
    const recycled =
      owned !== null &&
      owned.vm === vm &&
      this.forced === null &&
      recycleVm(owned, this.limits.memoryLimitBytes);
    if (!recycled && vm !== null) {
      try {
        dropVm(vm);
      } catch {
        // A VM that trapped may not dispose cleanly; it is unreachable either way.
      }
    }
    trimRecycledVms();
  }
}

/** Whether a message is being handled inside serveWaitingRuns (which must not nest). */
let serving = false;

/** @param {unknown} raw */
function dispatch(raw) {
  takeFromPort(raw);
  if (!serving) serveWaitingRuns();
}

/**
 * A message taken off the port, counted so the host knows when the port is empty of its messages (it
 * uses the shared channel only then).
 * @param {unknown} raw
 */
function takeFromPort(raw) {
  if (channel !== null && countsOnPort(/** @type {{ type?: unknown } | null} */ (raw)?.type))
    channel.noteTaken();
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
  const bell = doorbell;
  if (bell === null) return;
  serving = true;
  // While it serves here, the host may hand a settle over through the shared channel.
  const shared = channel;
  shared?.listen();
  try {
    const started = performance.now();
    while (operationsInFlight === 0 && runs.size > 0) {
      // Read the bell before looking for a message: one sent after this load changes the count, so the
      // spin and the wait below return at once instead of sleeping past it.
      const rung = Atomics.load(bell, 0);
      // The shared slot first: the host uses it only once this worker has taken everything it posted
      // on the port, so whatever the port holds now was sent after it.
      const text = shared === null ? null : shared.take(true);
      const next = text === null ? receiveMessageOnPort(port) : undefined;
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

/**
 * Handle one host message synchronously: a settle (the message of every quick host call) costs no
 * promise and no microtask here; only `init` has anything to await.
 * @param {unknown} raw
 */
function handle(raw) {
  try {
    onMessage(raw);
  } catch (error) {
    protocolViolation(error);
  }
}

/**
 * A protocol violation is a host bug: say so loudly on the way out rather than limp on.
 * @param {unknown} error
 */
function protocolViolation(error) {
  setImmediate(() => {
    throw error;
  });
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
    wasmModule = module;
    if (preludeBytecode !== null) {
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
  post(failure === null ? { type: "ready" } : { type: "init-failed", message: failure });
  // A first cell sent meanwhile waits for this either way.
  compilePreludeAtInit();
}

/**
 * One host message. A settle (the message of every quick host call) takes a path of its own, kept small:
 * V8 inlines a function into an optimized caller only up to 460 bytes of bytecode, and optimizes a
 * function by itself only after thousands of calls. With the settle inside the whole switch below
 * (630 bytes), the worker's answer path was not inlined into serveWaitingRuns (optimized in the first
 * cell, since it loops) and ran unoptimized for the first 7,000-10,000 calls of a fresh worker.
 * @param {unknown} raw
 */
function onMessage(raw) {
  const message = parseHostToWorkerMessage(raw);
  if (message.type === "settle") onSettle(message);
  else onControlMessage(message);
}

/**
 * A settle: the message of every quick host call. With nothing of its run in progress, enqueue runs it
 * at once.
 * @param {import("@codecell/bridge").HostToWorkerMessage & { type: "settle" }} message
 */
function onSettle(message) {
  runs.get(message.runId)?.enqueue(() => runs.get(message.runId)?.settle(message.items, message.deadlineAt));
}

/**
 * Every host message but a settle.
 * @param {import("@codecell/bridge").HostToWorkerMessage} message
 */
function onControlMessage(message) {
  switch (message.type) {
    case "init": {
      snapshotSecret = message.snapshotSecret;
      doorbell = message.doorbell ?? null;
      if (message.channel !== undefined) channel = new SharedChannel(message.channel, "worker");
      adoptShippedPrelude(message.prelude);
      if (message.entropy !== undefined) {
        entropy = message.entropy;
        entropyUsed = 0;
      }
      answerInit(/** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (message.module)).catch(
        protocolViolation,
      );
      return;
    }
    case "start": {
      // With timeoutMs, getting the VM ready (a worker's first run compiles the prelude) is not the
      // cell's time: no deadline applies until the cell starts (see GuestRun.start).
      const setupDeadline = message.timeoutMs === undefined ? message.deadlineAt : Number.POSITIVE_INFINITY;
      const run = new GuestRun(message.runId, message.limits, setupDeadline, message.signal);
      run.timeoutMs = message.timeoutMs ?? null;
      runs.set(message.runId, run);
      noteStartSurface(message.surface, message.limits.memoryLimitBytes);
      run.enqueue(() => run.start(message.surface, message.code, message.language));
      return;
    }
    case "restore": {
      const run = new GuestRun(message.runId, message.limits, message.deadlineAt, message.signal);
      runs.set(message.runId, run);
      run.enqueue(() => run.restore(message.snapshot));
      return;
    }
    case "settle":
      onSettle(message);
      return;
    case "suspend":
      runs.get(message.runId)?.enqueue(() => runs.get(message.runId)?.suspend());
      return;
    case "dispose": {
      const run = runs.get(message.runId);
      if (run) run.enqueue(() => run.release());
      return;
    }
  }
}

port.on("message", dispatch);
// A host message this thread cannot read leaves a run waiting for a command that never comes: exit, so
// the host's exit handler fails this worker's runs at once and replaces it.
port.on("messageerror", (error) => {
  setImmediate(() => {
    throw error;
  });
});
