// @ts-check
import { JSValueHandle, QuickJS } from "quickjs-wasi";
import { libraryOf, wasmExportsOf } from "./quickjs-wasi-internals.js";

/**
 * A fresh VM's image, to make a used VM fresh again in place instead of making a new one, and to make a
 * new VM without QuickJS's start-up (instantiate; the build ships one image, see serialize).
 *
 * Why: making a VM is most of a trivial cell's cost (instantiation, QuickJS's allocator touching fresh
 * pages, QuickJS's runtime and context and the prelude's bytecode, and the collections on V8's helper
 * threads that free dropped VMs). Writing the image back into a used VM's memory (its non-zero pages,
 * and zeros only where the run left bytes) touches no fresh page, runs no start-up code and leaves
 * nothing for the collector.
 *
 * Why it is the same as a fresh VM: everything a QuickJS-WASI VM is lives in its linear memory and one
 * wasm global, the shadow stack pointer (the module has no other mutable global, and no instruction of
 * it writes its function table), so a memory overwritten with the image and the pointer put back are
 * the VM as it was made, whatever the last run did in it. Three conditions:
 * - the memory has not grown: wasi-libc's allocator takes the memory's size as its break, so a grown
 *   memory behind the image's allocator state would waste the difference with every reuse (such a VM
 *   is dropped, as before). The image includes 512 KB of free heap for that reason;
 * - what a fresh VM takes from the clock is taken again: QuickJS seeds Math.random's state and stamps
 *   `performance`'s time origin (a field of the context, and the `timeOrigin` property of the
 *   `performance` object) as a context is made. Their places are found once, by probing a VM whose
 *   values are known (the seed by the generator's own step, xorshift64*), and checked by writing known
 *   values and reading them back from guest code; if either step fails (another QuickJS build) there
 *   is no image and every VM is made fresh, as before. The seed is then 8 random bytes, where a fresh
 *   VM takes the clock's milliseconds (two VMs made in the same millisecond share a sequence);
 * - quickjs-wasi's JavaScript side of the VM is put back too: its cached handles of `undefined`,
 *   `null`, `true`, `false` and the global object point into the memory, and its host-callback table
 *   holds the last run's host function. A VM whose library state is anything but at rest (an
 *   exception handle still owned, a promise awaited from the host, an asynchronous failure) is not
 *   reset.
 *
 * This uses members of quickjs-wasi that its types mark internal (its wasm exports and those fields),
 * reached only through quickjs-wasi-internals.js, which names the version they hold for (pinned in
 * package.json) and the tests that guard them; capture also checks that each field is there.
 */

/** QuickJS stack guard: without it deep recursion corrupts the VM instead of throwing RangeError. */
export const VM_STACK_BYTES = 256 * 1024;

/**
 * The options every VM of a run is made with, in one place, because an image (and the image the build
 * ships) is only the same VM as one made fresh when it was made with the same options: the memory
 * limit, the stack guard, the time zone and whether there is an interrupt handler are written into
 * the VM's memory as it is made. `wasi` and the interrupt handler's body are quickjs-wasi's JavaScript
 * side and may differ.
 * @param {import("quickjs-wasi").QuickJSOptions["wasm"]} wasm @param {number} memoryLimit
 * @param {() => boolean} interruptHandler @param {import("quickjs-wasi").QuickJSOptions["wasi"]} wasi
 * @returns {import("quickjs-wasi").QuickJSOptions}
 */
export function runVmOptions(wasm, memoryLimit, interruptHandler, wasi) {
  return { wasm, memoryLimit, maxStackSize: VM_STACK_BYTES, timezoneOffset: 0, interruptHandler, wasi };
}

/**
 * What the VM the build images reads from the clock (milliseconds; any moment, fixed) and gets as
 * entropy (every byte), while it is made (see shippedImageOf). Not round numbers: the image's capture
 * finds the time origin by its value, which must be found exactly once in the memory.
 */
const BUILD_CLOCK_MS = 1_767_225_723_457;
const BUILD_ENTROPY_BYTE = 0xa5;
/** WASI's "not supported" error, for a clock the build's VM is not given. */
const WASI_ERRNO_NOSYS = 52;

/**
 * The image the build ships (scripts/build-prelude-bytecode.mjs writes it to dist/worker/fresh-vm.image):
 * the fresh VM of a run of `memoryLimit` given the prelude's `bytecode`, serialized. Two builds of one
 * source write the same bytes: while the VM is made and given the bytecode, its clock reads a fixed
 * moment and its entropy is fixed bytes. Every VM made from an image still gets its own seed and time
 * origin (reset). What else a VM takes from the clock and from entropy as it starts (4 bytes of
 * wasi-libc's start-up entropy, and one more word from the clock) stays as the image has it in every
 * VM made from it, as it always did in the VMs a worker resets to its own image, and as a release's
 * image already fixed it for all that release's VMs; fixing it in the build makes the shipped image
 * checkable against its source.
 * @param {import("quickjs-wasi").QuickJSOptions["wasm"]} wasm @param {Uint8Array} bytecode
 * @param {number} memoryLimit @returns {Promise<Uint8Array>}
 */
export async function shippedImageOf(wasm, bytecode, memoryLimit) {
  let starting = true;
  /** @param {{ buffer: ArrayBuffer }} memory */
  const fixedStart = (memory) => ({
    clock_time_get(
      /** @type {number} */ clockId,
      /** @type {bigint} */ _precision,
      /** @type {number} */ pointer,
    ) {
      if (clockId !== 0 && clockId !== 1) return WASI_ERRNO_NOSYS;
      const now = starting ? BUILD_CLOCK_MS : Date.now();
      new DataView(memory.buffer).setBigUint64(pointer, BigInt(now) * 1_000_000n, true);
      return 0;
    },
    random_get(/** @type {number} */ pointer, /** @type {number} */ length) {
      new Uint8Array(memory.buffer, pointer, length).fill(BUILD_ENTROPY_BYTE);
      return 0;
    },
  });
  const vm = await QuickJS.create(
    runVmOptions(wasm, memoryLimit, () => false, /** @type {never} */ (fixedStart)),
  );
  try {
    const prelude = vm.evalBytecode(bytecode);
    // The capture's check reads the clock against values it writes: from here on it is the real one.
    starting = false;
    const image = VmImage.capture(vm, (target) => {
      crypto.getRandomValues(target);
    });
    if (image === null) {
      throw new Error("this quickjs.wasm's fresh VM cannot be imaged; see src/worker/vm-image.js");
    }
    return image.serialize({ memoryLimit, preludePointer: prelude.ptr });
  } finally {
    vm.dispose();
  }
}

/** quickjs-wasi's cached singleton handles: each points at a box in the VM's memory. */
const CACHED_HANDLES = ["_global", "_undefined", "_null", "_true", "_false"];
/** Free heap a fresh image includes (see capture). */
const HEADROOM_BYTES = 512 * 1024;
/** How far into the context structure the probes look for the seed and the time origin. */
const CONTEXT_SCAN_BYTES = 4096;
const MASK_64 = (1n << 64n) - 1n;
const WASM_PAGE_BYTES = 64 * 1024;
/** A shipped image holds only the pages of its memory with a byte that is not zero (most are zero). */
const IMAGE_PAGE_BYTES = 4096;
/** "CCVI", then the layout's version: another version is not read (see VmImage.deserialize). */
const SHIPPED_MAGIC = 0x49564343;
const SHIPPED_FORMAT = 1;
/** The 32-bit words before the cached handles' pointers (see VmImage.serialize). */
const SHIPPED_HEADER_WORDS = 14;
/** Far above a fresh VM's memory; a larger one is not an image this build wrote. */
const MAX_SHIPPED_MEMORY_BYTES = 64 * 1024 * 1024;

/** @typedef {{ seedAt: number, originAt: number, timeOriginAt: number, timeOriginAddend: bigint }} Places */

/**
 * xorshift64*, QuickJS's Math.random: the value the next call returns from state `state`.
 * @param {bigint} state
 */
function nextRandom(state) {
  let x = state;
  x ^= x >> 12n;
  x = (x ^ (x << 25n)) & MASK_64;
  x ^= x >> 27n;
  const mixed = (x * 0x2545f4914f6cdd1dn) & MASK_64;
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, (mixed >> 12n) | (1023n << 52n), true);
  return view.getFloat64(0, true) - 1;
}

/** The bits of a double. @param {number} value */
function bitsOf(value) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value, true);
  return view.getBigUint64(0, true);
}

/** Zeros to compare pages with (Buffer.compare is a memcmp): one page, and a run of them. */
const ZERO_PAGE = new Uint8Array(IMAGE_PAGE_BYTES);
const ZERO_RUN_PAGES = 16;
const ZERO_RUN = new Uint8Array(ZERO_RUN_PAGES * IMAGE_PAGE_BYTES);

/** The indexes of the IMAGE_PAGE_BYTES pages of `bytes` that hold a byte other than zero. @param {Uint8Array} bytes */
function nonZeroPages(bytes) {
  /** @type {number[]} */
  const pages = [];
  for (let page = 0; page * IMAGE_PAGE_BYTES < bytes.byteLength; page++) {
    const start = page * IMAGE_PAGE_BYTES;
    if (Buffer.compare(bytes.subarray(start, start + IMAGE_PAGE_BYTES), ZERO_PAGE) !== 0) pages.push(page);
  }
  return pages;
}

/**
 * Evaluate `code` (an expression whose value is JSON text) and free what it returns.
 * @param {import("quickjs-wasi").QuickJS} vm @param {string} code @returns {unknown}
 */
function evaluate(vm, code) {
  const result = vm.evalCode(code);
  try {
    return JSON.parse(result.toString());
  } finally {
    result.dispose();
  }
}

export class VmImage {
  /**
   * @param {Uint8Array} memory
   * @param {{ stackPointer: number, runtimePtr: number, contextPtr: number }} pointers the shadow stack
   *   pointer, and where QuickJS's runtime and context are in the memory
   * @param {Places} places
   * @param {(number | null)[]} cached the pointers of CACHED_HANDLES when the image was taken
   * @param {(target: Uint8Array) => void} randomFill
   * @param {number[]} [pages] the memory's non-zero pages when they are known already (a shipped image
   *   lists them), in order; otherwise found here
   */
  constructor(memory, pointers, places, cached, randomFill, pages = nonZeroPages(memory)) {
    this.memory = memory;
    this.stackPointer = pointers.stackPointer;
    this.runtimePtr = pointers.runtimePtr;
    this.contextPtr = pointers.contextPtr;
    this.places = places;
    this.cached = cached;
    this.randomFill = randomFill;
    /** The image's pages that hold a byte other than zero, in order. */
    this.pages = pages;
  }

  /**
   * The image of `vm`, made a moment ago and given nothing but the prelude's bytecode, or null when
   * this QuickJS build cannot be reset safely (see the module comment). Probing runs code in `vm`: with
   * an image, `vm` is reset to it before this returns (a fresh VM again); with null, the caller must
   * drop `vm`.
   * @param {import("quickjs-wasi").QuickJS} vm @param {(target: Uint8Array) => void} randomFill
   * @returns {VmImage | null}
   */
  static capture(vm, randomFill) {
    const library = libraryOf(vm);
    for (const field of [...CACHED_HANDLES, "hostCallbacks", "_ownedHandles", "promiseWaiters"]) {
      if (!(field in library)) return null;
    }
    // Room for a run to allocate without growing the memory (a surface of a few dozen tools and a
    // small cell grow a bare VM's by a page or two): the allocator extends its heap by HEADROOM_BYTES
    // and takes it back as free space, which the image then includes. No guest code runs.
    const exports = wasmExportsOf(vm);
    const room = exports.wasm_malloc(HEADROOM_BYTES);
    if (room === 0) return null;
    exports.wasm_free(room);
    const snapshot = vm.snapshot();
    if (snapshot.extensions.length > 0) return null;
    const cached = CACHED_HANDLES.map((field) => library[field]?.ptr ?? null);
    let image;
    try {
      const [timeOrigin, random] = /** @type {[number, number]} */ (
        evaluate(vm, "JSON.stringify([performance.timeOrigin, Math.random()])")
      );
      const places = findPlaces(snapshot, timeOrigin, random);
      if (places === null) return null;
      image = new VmImage(snapshot.memory, snapshot, places, cached, randomFill);
      // Check the places: known values written, read back by guest code.
      image.reset(vm, { seed: 0x9e3779b97f4a7c15n, timeOrigin: Date.now() - 60_000 });
      const [readOrigin, readRandom, readNow] = /** @type {[number, number, number]} */ (
        evaluate(vm, "JSON.stringify([performance.timeOrigin, Math.random(), performance.now()])")
      );
      const expectedOrigin = Date.now() - 60_000;
      if (
        Math.abs(readOrigin - expectedOrigin) > 5_000 ||
        readRandom !== nextRandom(0x9e3779b97f4a7c15n) ||
        Math.abs(readNow - 60_000) > 5_000 ||
        // The probes must fit in the image's free heap: the VM handed on is the image again.
        !image.fits(vm)
      ) {
        return null;
      }
    } catch {
      return null;
    }
    image.reset(vm);
    return image;
  }

  /**
   * Whether `vm` can be reset to this image: its memory has the image's size and quickjs-wasi holds
   * nothing of the last run (see the module comment).
   * @param {import("quickjs-wasi").QuickJS} vm
   */
  fits(vm) {
    const library = libraryOf(vm);
    try {
      if (library.disposed !== false || library.asyncFailure !== undefined) return false;
      if (library.hostSettlementDepth !== 0 || library.promiseWaiters?.size !== 0) return false;
      if (library._ownedHandles?.size !== 0 || library._activeScope != null) return false;
      return wasmExportsOf(vm).memory.buffer.byteLength === this.memory.byteLength;
    } catch {
      return false;
    }
  }

  /**
   * Make `vm` the fresh VM of this image again, with a new seed and time origin (fixed ones: the
   * capture's check). The caller has checked `fits(vm)` and holds no handle of the last run.
   * @param {import("quickjs-wasi").QuickJS} vm @param {{ seed: bigint, timeOrigin: number }} [fixed]
   */
  reset(vm, fixed) {
    this.#writeInto(new Uint8Array(wasmExportsOf(vm).memory.buffer));
    this.#freshen(vm, fixed);
  }

  /**
   * Make `target` (a used VM's memory, of the image's size) the image without writing a page that is zero
   * in both: the image's non-zero pages are copied, and a page the image has as zeros is cleared only
   * where it is not zero already (checked 16 pages at a time). A page nobody wrote reads as zeros and
   * holds nothing resident; writing it costs a page fault (so copying the whole image over a VM's
   * memory would fault in every page of it) and keeps it resident.
   * @param {Uint8Array} target
   */
  #writeInto(target) {
    const imagePages = this.pages;
    const pageCount = target.byteLength / IMAGE_PAGE_BYTES;
    let page = 0;
    for (let index = 0; index <= imagePages.length; index++) {
      // The image's zero pages up to its next non-zero one, checked a run of pages at a time.
      const nextImagePage = index < imagePages.length ? /** @type {number} */ (imagePages[index]) : pageCount;
      while (page < nextImagePage) {
        const pages = Math.min(ZERO_RUN_PAGES, nextImagePage - page);
        const start = page * IMAGE_PAGE_BYTES;
        const end = start + pages * IMAGE_PAGE_BYTES;
        if (Buffer.compare(target.subarray(start, end), ZERO_RUN.subarray(0, end - start)) !== 0) {
          for (let at = start; at < end; at += IMAGE_PAGE_BYTES) {
            const pageEnd = at + IMAGE_PAGE_BYTES;
            if (Buffer.compare(target.subarray(at, pageEnd), ZERO_PAGE) !== 0) target.fill(0, at, pageEnd);
          }
        }
        page += pages;
      }
      if (index === imagePages.length) break;
      const start = nextImagePage * IMAGE_PAGE_BYTES;
      target.set(this.memory.subarray(start, start + IMAGE_PAGE_BYTES), start);
      page = nextImagePage + 1;
    }
  }

  /**
   * What makes a VM whose memory holds the image this image's fresh VM: the stack pointer, a new seed
   * and time origin (fixed ones: the capture's check), quickjs-wasi's cached handles and host callbacks.
   * @param {import("quickjs-wasi").QuickJS} vm @param {{ seed: bigint, timeOrigin: number }} [fixed]
   */
  #freshen(vm, fixed) {
    const library = libraryOf(vm);
    const exports = wasmExportsOf(vm);
    exports.__stack_pointer.value = this.stackPointer;
    const view = new DataView(exports.memory.buffer);
    const { seedAt, originAt, timeOriginAt, timeOriginAddend } = this.places;
    let seed = fixed?.seed ?? 0n;
    while (seed === 0n) {
      const random = new Uint8Array(8);
      this.randomFill(random);
      seed = new DataView(random.buffer).getBigUint64(0, true);
    }
    const timeOrigin = fixed?.timeOrigin ?? Date.now();
    view.setBigUint64(seedAt, seed, true);
    view.setFloat64(originAt, timeOrigin, true);
    view.setBigUint64(timeOriginAt, (bitsOf(timeOrigin) - timeOriginAddend) & MASK_64, true);
    CACHED_HANDLES.forEach((field, index) => {
      const pointer = this.cached[index] ?? null;
      library[field] = pointer === null ? null : new JSValueHandle(vm, pointer, true);
    });
    library.hostCallbacks.clear();
  }

  /**
   * A new VM that is this image's fresh VM (a new instance given the image, then reset like a used VM,
   * so it has its own seed and time origin): what making a VM with the same options and giving it the
   * same bytecode gives, without running QuickJS's start-up or the bytecode again. `options` must be
   * the ones the image's VM was made with (runVmOptions, same memory limit).
   * @param {import("quickjs-wasi").QuickJSOptions} options @returns {Promise<import("quickjs-wasi").QuickJS>}
   */
  async instantiate(options) {
    // quickjs-wasi's restore, given no bytes: a new instance with the runtime's and context's pointers,
    // the stack pointer and the options' limits set (written into what will be the image's pages); the
    // image goes in below, page by page.
    const vm = await QuickJS.restore(
      {
        memory: new Uint8Array(0),
        stackPointer: this.stackPointer,
        runtimePtr: this.runtimePtr,
        contextPtr: this.contextPtr,
        extensions: [],
      },
      options,
    );
    try {
      const memory = wasmExportsOf(vm).memory;
      const missing = this.memory.byteLength - memory.buffer.byteLength;
      if (missing < 0 || missing % WASM_PAGE_BYTES !== 0)
        throw new Error("the image does not fit a new instance");
      if (missing > 0) memory.grow(missing / WASM_PAGE_BYTES);
      this.#copyIntoNew(new Uint8Array(memory.buffer));
      this.#freshen(vm);
    } catch (error) {
      vm.dispose();
      throw error;
    }
    return vm;
  }

  /**
   * The pages a new instance's memory starts with a byte other than zero in (its data segments, and
   * what restore wrote) where the image has only zeros: found once, since instantiating a module writes
   * the same bytes every time. @type {number[] | null}
   */
  #instancePages = null;

  /**
   * Make a new instance's memory the image: its pages are untouched but for the module's data segments,
   * so only the image's non-zero pages are written and the few the instance starts with that the image
   * has as zeros cleared (no page is read after the first instance).
   * @param {Uint8Array} target
   */
  #copyIntoNew(target) {
    const imagePages = this.pages;
    if (this.#instancePages === null) {
      const inImage = new Set(imagePages);
      this.#instancePages = nonZeroPages(target).filter((page) => !inImage.has(page));
    }
    for (const page of this.#instancePages) {
      target.fill(0, page * IMAGE_PAGE_BYTES, (page + 1) * IMAGE_PAGE_BYTES);
    }
    for (const page of imagePages) {
      const start = page * IMAGE_PAGE_BYTES;
      target.set(this.memory.subarray(start, start + IMAGE_PAGE_BYTES), start);
    }
  }

  /**
   * This image as bytes the build ships beside the prelude's bytecode (see VmImage.deserialize), with
   * the memory limit its VM was made with and where that VM's prelude function is.
   * @param {{ memoryLimit: number, preludePointer: number }} made @returns {Uint8Array}
   */
  serialize(made) {
    const pages = this.pages;
    const headerWords = SHIPPED_HEADER_WORDS + CACHED_HANDLES.length + pages.length;
    const out = new Uint8Array(headerWords * 4 + pages.length * IMAGE_PAGE_BYTES);
    const view = new DataView(out.buffer);
    const words = [
      SHIPPED_MAGIC,
      SHIPPED_FORMAT,
      this.memory.byteLength,
      made.memoryLimit,
      this.stackPointer,
      this.runtimePtr,
      this.contextPtr,
      made.preludePointer,
      this.places.seedAt,
      this.places.originAt,
      this.places.timeOriginAt,
      Number(this.places.timeOriginAddend & 0xffffffffn),
      Number(this.places.timeOriginAddend >> 32n),
      pages.length,
      ...this.cached.map((pointer) => pointer ?? 0),
      ...pages,
    ];
    for (let index = 0; index < words.length; index++) view.setUint32(index * 4, words[index] ?? 0, true);
    pages.forEach((page, index) => {
      const start = page * IMAGE_PAGE_BYTES;
      out.set(
        this.memory.subarray(start, start + IMAGE_PAGE_BYTES),
        headerWords * 4 + index * IMAGE_PAGE_BYTES,
      );
    });
    return out;
  }

  /**
   * The image `serialize` wrote, or null when `bytes` are not one (any field out of its range, pages out
   * of order, a length that does not add up). The bytes must be ours (the host checks their SHA-256
   * against the manifest the build wrote beside them): a well-formed image of another VM would still be
   * a VM the sandbox did not make.
   * @param {Uint8Array} bytes @param {(target: Uint8Array) => void} randomFill
   * @returns {{ image: VmImage, memoryLimit: number, preludePointer: number } | null}
   */
  static deserialize(bytes, randomFill) {
    if (
      !(bytes instanceof Uint8Array) ||
      bytes.byteLength < (SHIPPED_HEADER_WORDS + CACHED_HANDLES.length) * 4
    ) {
      return null;
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const word = (/** @type {number} */ index) => view.getUint32(index * 4, true);
    if (word(0) !== SHIPPED_MAGIC || word(1) !== SHIPPED_FORMAT) return null;
    const memoryBytes = word(2);
    const memoryLimit = word(3);
    const stackPointer = word(4);
    const runtimePtr = word(5);
    const contextPtr = word(6);
    const preludePointer = word(7);
    const seedAt = word(8);
    const originAt = word(9);
    const timeOriginAt = word(10);
    const timeOriginAddend = (BigInt(word(12)) << 32n) | BigInt(word(11));
    const pageCount = word(13);
    if (memoryBytes === 0 || memoryBytes % WASM_PAGE_BYTES !== 0 || memoryBytes > MAX_SHIPPED_MEMORY_BYTES)
      return null;
    const headerWords = SHIPPED_HEADER_WORDS + CACHED_HANDLES.length + pageCount;
    if (bytes.byteLength !== headerWords * 4 + pageCount * IMAGE_PAGE_BYTES) return null;
    const inside = (/** @type {number} */ pointer, /** @type {number} */ size) =>
      pointer > 0 && pointer + size <= memoryBytes;
    if (![stackPointer, runtimePtr, contextPtr, preludePointer].every((pointer) => inside(pointer, 0)))
      return null;
    if (![seedAt, originAt, timeOriginAt].every((at) => inside(at, 8) && at % 8 === 0)) return null;
    const cached = CACHED_HANDLES.map((_, index) => word(SHIPPED_HEADER_WORDS + index));
    if (!cached.every((pointer) => pointer === 0 || inside(pointer, 0))) return null;
    const memory = new Uint8Array(memoryBytes);
    /** @type {number[]} */
    const pages = [];
    for (let index = 0; index < pageCount; index++) {
      const page = word(SHIPPED_HEADER_WORDS + CACHED_HANDLES.length + index);
      if (page <= (pages.at(-1) ?? -1) || (page + 1) * IMAGE_PAGE_BYTES > memoryBytes) return null;
      pages.push(page);
      const start = headerWords * 4 + index * IMAGE_PAGE_BYTES;
      memory.set(bytes.subarray(start, start + IMAGE_PAGE_BYTES), page * IMAGE_PAGE_BYTES);
    }
    const places = { seedAt, originAt, timeOriginAt, timeOriginAddend };
    const image = new VmImage(
      memory,
      { stackPointer, runtimePtr, contextPtr },
      places,
      cached.map((pointer) => (pointer === 0 ? null : pointer)),
      randomFill,
      pages,
    );
    return { image, memoryLimit, preludePointer };
  }
}

/**
 * Where, in a fresh VM's image, its seed, its time origin and `performance.timeOrigin` are, given the
 * values guest code read from that VM (its first Math.random() and its time origin): each must be
 * found exactly once, or null.
 * @param {{ memory: Uint8Array, contextPtr: number }} snapshot @param {number} timeOrigin @param {number} random
 */
function findPlaces(snapshot, timeOrigin, random) {
  const memory = snapshot.memory;
  const view = new DataView(memory.buffer, memory.byteOffset, memory.byteLength);
  const start = snapshot.contextPtr - (snapshot.contextPtr % 8);
  const end = Math.min(memory.byteLength, start + CONTEXT_SCAN_BYTES);
  /** @type {number[]} */
  const seeds = [];
  /** @type {number[]} */
  const origins = [];
  for (let at = start; at + 8 <= end; at += 8) {
    const word = view.getBigUint64(at, true);
    if (word !== 0n && nextRandom(word) === random) seeds.push(at);
    if (view.getFloat64(at, true) === timeOrigin) origins.push(at);
  }
  // `timeOrigin` is a property value in the heap, held as QuickJS's NaN-boxed double: the double's bits
  // less a constant in the high half. Its low half is the double's.
  const bits = bitsOf(timeOrigin);
  const low = Number(bits & 0xffffffffn);
  const words = new Uint32Array(memory.buffer, memory.byteOffset, memory.byteLength >>> 2);
  /** @type {number[]} */
  const boxed = [];
  for (let index = 0; index < words.length; index += 2) {
    if (words[index] === low && !origins.includes(index * 4)) boxed.push(index * 4);
  }
  if (seeds.length !== 1 || origins.length !== 1 || boxed.length !== 1) return null;
  const timeOriginAt = /** @type {number} */ (boxed[0]);
  return {
    seedAt: /** @type {number} */ (seeds[0]),
    originAt: /** @type {number} */ (origins[0]),
    timeOriginAt,
    timeOriginAddend: (bits - view.getBigUint64(timeOriginAt, true)) & MASK_64,
  };
}
