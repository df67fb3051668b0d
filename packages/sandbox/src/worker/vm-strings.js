// @ts-check
import { JSValueHandle } from "quickjs-wasi";

/** Longest text written through the scratch area; longer text takes the library's own path. */
const SCRATCH_BYTES = 1024;

/**
 * The two strings every nested call moves across the VM boundary, the short way: the result's JSON
 * into the VM (newString) and the request's JSON out of it (read). quickjs-wasi's own `newString`
 * encodes into a fresh array, allocates, copies and frees for every string, and its `toString`
 * allocates, decodes through TextDecoder after a scan for surrogates, and frees: together about as
 * much CPU as the rest of the worker's part of a call. Here short ASCII text is written straight
 * into a scratch area of the VM's memory that lives as long as the VM, and a string is read with one
 * UTF-8 decode of the VM's memory in place. Text this cannot carry exactly (non-ASCII text into the
 * VM; a lone surrogate, which QuickJS writes as WTF-8, out of it) goes through the library as before.
 *
 * This uses two members of quickjs-wasi 3.7.0 that its types mark internal, the VM's wasm exports
 * (`_getExports`) and a handle's pointer (`ptr`), with the same export calls the library makes
 * (`qjs_new_string`, `qjs_get_string_len`, `qjs_free_cstring`); the version is pinned, and every
 * nested call in the tests goes through here.
 */
export class VmStrings {
  /** @param {import("quickjs-wasi").QuickJS} vm */
  constructor(vm) {
    this.vm = vm;
    /** @type {ReturnType<import("quickjs-wasi").QuickJS["_getExports"]>} */
    this.exports = vm._getExports();
    /** Scratch for short text, and 4 bytes after it for a read's length; 0 until first used. */
    this.scratch = 0;
    /** @type {ArrayBuffer | null} the VM memory `bytes` views (it changes when the memory grows) */
    this.buffer = null;
    /** @type {Buffer} */
    this.bytes = Buffer.alloc(0);
  }

  /** A view of the VM's memory as it is now. */
  memory() {
    const buffer = /** @type {ArrayBuffer} */ (this.exports.memory.buffer);
    if (buffer !== this.buffer) {
      this.buffer = buffer;
      this.bytes = Buffer.from(buffer);
    }
    return this.bytes;
  }

  scratchArea() {
    if (this.scratch === 0) {
      const pointer = this.exports.wasm_malloc(SCRATCH_BYTES + 4);
      if (pointer === 0) throw new Error("wasm_malloc failed");
      this.scratch = pointer;
    }
    return this.scratch;
  }

  /**
   * A new guest string holding `text` (the caller disposes it).
   * @param {string} text
   */
  newString(text) {
    const length = text.length;
    if (length >= SCRATCH_BYTES) return this.newLongString(text);
    const at = this.scratchArea();
    const bytes = this.memory();
    for (let index = 0; index < length; index++) {
      const code = text.charCodeAt(index);
      if (code >= 0x80) return this.vm.newString(text);
      bytes[at + index] = code;
    }
    bytes[at + length] = 0;
    const handle = new JSValueHandle(this.vm, this.exports.qjs_new_string(at, length));
    if (this.exports.qjs_is_exception(handle.ptr) === 0) return handle;
    // The VM could not make it (out of memory): the library's path fails the same way and throws the
    // VM's exception as it does for every other value.
    handle.dispose();
    return this.vm.newString(text);
  }

  /**
   * A long string (a large tool result, a run's surface): UTF-8 encoded by Node straight into a buffer of
   * the VM's allocator, where the library first scans it for lone surrogates with a regular expression,
   * encodes it into a fresh array and copies that in (two passes and a copy more). Text with a lone
   * surrogate, which needs the library's WTF-8, goes through the library.
   * @param {string} text
   */
  newLongString(text) {
    // String.prototype.isWellFormed (Node 20) is newer than this project's lib types.
    if (!(/** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (text)).isWellFormed())) {
      return this.vm.newString(text);
    }
    const length = Buffer.byteLength(text, "utf8");
    const pointer = this.exports.wasm_malloc(length + 1);
    if (pointer === 0) return this.vm.newString(text);
    try {
      // After the allocation, which may have grown the memory.
      const bytes = this.memory();
      bytes.write(text, pointer, length, "utf8");
      bytes[pointer + length] = 0;
      const handle = new JSValueHandle(this.vm, this.exports.qjs_new_string(pointer, length));
      if (this.exports.qjs_is_exception(handle.ptr) === 0) return handle;
      handle.dispose();
    } finally {
      this.exports.wasm_free(pointer);
    }
    // The VM could not make it (out of memory): the library's path throws the VM's exception.
    return this.vm.newString(text);
  }

  /**
   * The text of a guest string (an argument of a host call: the prelude passes only strings).
   * @param {import("quickjs-wasi").JSValueHandle} handle
   */
  read(handle) {
    const lengthAt = this.scratchArea() + SCRATCH_BYTES;
    const text = this.exports.qjs_get_string_len(handle.ptr, lengthAt);
    if (text === 0) return handle.toString();
    const bytes = this.memory();
    const length = bytes.readUInt32LE(lengthAt);
    const decoded = bytes.toString("utf8", text, text + length);
    this.exports.qjs_free_cstring(text);
    // U+FFFD: either the text has one, or a lone surrogate that UTF-8 cannot carry; the library's
    // WTF-8 decoder tells them apart.
    return decoded.includes("\uFFFD") ? handle.toString() : decoded;
  }

  /** Free the scratch area (before a snapshot, so the image carries no last result). */
  release() {
    if (this.scratch !== 0) this.exports.wasm_free(this.scratch);
    this.scratch = 0;
  }
}
