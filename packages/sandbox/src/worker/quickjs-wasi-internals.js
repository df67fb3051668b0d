// @ts-check

/**
 * Every reach into quickjs-wasi past its public API, in one place: members its types mark internal
 * (the instance's wasm exports, and fields of its VM object). They are what a fresh VM's image needs
 * to reset a used VM in place (vm-image.js) and what lets a dropped VM's memory count towards V8's
 * next collection (dropVm in vm-pool.js).
 *
 * Written for quickjs-wasi 3.7.0, which package.json pins exactly. Guarded by
 * test/quickjs-wasi-internals.test.ts (the installed version is this one, and every export used here
 * is there), test/vm-image.test.ts (lists every field of the library's VM object, so an upgrade that
 * adds state fails until the reset accounts for it, and runs cells on reset VMs) and
 * test/vm-memory-release.test.ts (dropped VMs' memories are collected as cells go on).
 */
export const QUICKJS_WASI_VERSION = "3.7.0";

/**
 * The exports of a VM's wasm instance this package uses: its linear memory, its shadow stack pointer
 * (the module's one mutable global) and its allocator.
 * @typedef {{
 *   memory: { buffer: ArrayBuffer, grow(pages: number): number },
 *   __stack_pointer: { value: number },
 *   wasm_malloc(size: number): number,
 *   wasm_free(pointer: number): void,
 * }} WasmExports
 */

/**
 * quickjs-wasi's VM object with its internal fields reachable.
 * @param {import("quickjs-wasi").QuickJS} vm @returns {Record<string, any>}
 */
export function libraryOf(vm) {
  return /** @type {Record<string, any>} */ (/** @type {unknown} */ (vm));
}

/** @param {import("quickjs-wasi").QuickJS} vm @returns {WasmExports} */
export function wasmExportsOf(vm) {
  return /** @type {WasmExports} */ (/** @type {unknown} */ (vm._getExports()));
}

/**
 * The VM's `WebAssembly.Memory` (this project's lib has no WebAssembly types), or null once the VM is
 * disposed (a disposed VM has no exports).
 * @param {import("quickjs-wasi").QuickJS} vm @returns {WasmExports["memory"] | null}
 */
export function linearMemoryOf(vm) {
  try {
    return vm._getExports()?.memory ?? null;
  } catch {
    return null;
  }
}
