import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { loadShippedForWasm, type PreludeBytecode } from "./prelude-bytecode.js";

/** A compiled `WebAssembly.Module`, typed opaquely (this project's lib has no WebAssembly types). */
export type CompiledModule = object;

const wasmApi = (
  globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<CompiledModule> } }
).WebAssembly;

const compiled = new Map<string, Promise<CompiledModule>>();
/** The shipped prelude bytecode checked against each module's wasm bytes (null: none fits). */
const preludes = new WeakMap<CompiledModule, PreludeBytecode | null>();

/** Where the quickjs-wasi package (a direct dependency) keeps its engine. */
export function defaultWasmPath(): string {
  return createRequire(import.meta.url).resolve("quickjs-wasi/quickjs.wasm");
}

/**
 * Read and compile `quickjs.wasm` once per process and path; every worker receives the same compiled
 * module, so no worker and no VM compiles it again. While it compiles, the prelude bytecode shipped
 * with this package is read and checked against the same bytes (see preludeFor). What is compiled exports
 * only the functions quickjs-wasi calls (keepFunctionExports below), so no instance builds wrappers for the rest.
 */
export function loadQuickJsModule(location?: URL | string): Promise<CompiledModule> {
  const path =
    location === undefined ? defaultWasmPath() : location instanceof URL ? fileURLToPath(location) : location;
  let promise = compiled.get(path);
  if (promise === undefined) {
    promise = compileNow(path);
    compiled.set(path, promise);
    // A failed load is not cached, so a later pool can try again (the file may have been restored).
    promise.catch(() => compiled.delete(path));
  }
  return promise;
}

/**
 * Reads the file, checks the prelude against it, filters its exports and starts V8's compile, all now
 * (up to the compile, which runs on V8's threads), not at a later turn of the host's event loop (a
 * missing file is a rejection, not a throw). Why: the early worker waits for its `init`, which needs
 * the compiled module, and a host that starts that worker (the CLI, the engine) then runs long
 * synchronous stretches (the CLI compiles and runs its bundle, then reads its config), with no turn of
 * its event loop in between. Begun at the next turn, the compile would start only after those stretches
 * and keep the ready worker waiting; begun here, it runs beside them. Why not
 * `fs.promises.readFile`: its open, stat, read and close each wait for such a turn too.
 */
async function compileNow(path: string): Promise<CompiledModule> {
  const bytes: Uint8Array = readFileSync(path);
  // The manifest's checks hash the file as read, so they come before the export section is rewritten:
  // with the filter the build worked out for exactly these bytes when it fits, else by reading it here.
  const { prelude, exportFilter } = loadShippedForWasm(bytes, QUICKJS_EXPORTS_USED);
  if (exportFilter !== null) bytes.set(exportFilter.bytes, exportFilter.offset);
  else keepFunctionExports(bytes, (name) => QUICKJS_EXPORTS_USED.has(name));
  const module = await wasmApi.compile(bytes);
  preludes.set(module, prelude);
  return module;
}

/**
 * The shipped prelude bytecode to send a worker with this module in `init`: null unless it was built
 * for exactly this wasm and its hashes check out (src/prelude-bytecode.ts).
 */
export function preludeFor(module: CompiledModule): PreludeBytecode | null {
  return preludes.get(module) ?? null;
}

// --- only the exports quickjs-wasi calls ----------------------------------------------------------------
// (Kept in this file, not one of its own: it loads with the early worker start, where each module file counts.)
// Why: V8 builds a JavaScript wrapper object for every function a wasm module exports, for every instance.
// quickjs.wasm exports 451 functions (the whole QuickJS C API and its libc); quickjs-wasi's JavaScript calls
// about a hundred of them. Every run takes a fresh VM, so each run would pay for some 350 wrappers nobody
// calls, in the worker's V8 heap and in instantiation time. The sandbox therefore compiles a copy
// of the module whose export section lists only the functions quickjs-wasi uses (memory, table and
// globals are all kept). The code itself is unchanged: an export is only a name for a function that the
// module keeps either way.

/**
 * The functions of quickjs.wasm that quickjs-wasi 3.7 names anywhere in its JavaScript (dist/index.js,
 * extensions.js, wasi-shim.js), plus what this package names. A name is kept if it appears at all, so
 * the list errs on the side of keeping. `test/wasm-exports.test.ts` scans the installed quickjs-wasi
 * again and fails, naming the function, if an upgrade starts to use one that is not here.
 */
export const QUICKJS_EXPORTS_USED: ReadonlySet<string> = new Set([
  "_initialize",
  "abort",
  "ceil",
  "floor",
  "free",
  "JS_PromiseThen",
  "JS_ToCStringLen2",
  "log",
  "malloc",
  "qjs_call",
  "qjs_call_constructor",
  "qjs_compile",
  "qjs_compute_memory_usage",
  "qjs_define_prop_string",
  "qjs_define_prop_value",
  "qjs_dup_value",
  "qjs_eval",
  "qjs_eval_bytecode",
  "qjs_execute_pending_job",
  "qjs_free_cstring",
  "qjs_free_value",
  "qjs_get_allocated_size",
  "qjs_get_array_buffer",
  "qjs_get_big_int64",
  "qjs_get_bool",
  "qjs_get_class_id",
  "qjs_get_class_name",
  "qjs_get_context_ptr",
  "qjs_get_exception",
  "qjs_get_false",
  "qjs_get_float64",
  "qjs_get_gc_threshold",
  "qjs_get_global",
  "qjs_get_null",
  "qjs_get_own_property_descriptor",
  "qjs_get_own_property_keys",
  "qjs_get_own_property_names",
  "qjs_get_own_property_names_all",
  "qjs_get_prop_string",
  "qjs_get_prop_uint32",
  "qjs_get_prop_value",
  "qjs_get_prototype_of",
  "qjs_get_proxy_handler",
  "qjs_get_proxy_target",
  "qjs_get_quickjs_version",
  "qjs_get_runtime_ptr",
  "qjs_get_string_len",
  "qjs_get_symbol_description",
  "qjs_get_true",
  "qjs_get_typed_array_buffer",
  "qjs_get_undefined",
  "qjs_get_value_ptr",
  "qjs_has_own_property",
  "qjs_has_own_property_value",
  "qjs_init",
  "qjs_init2",
  "qjs_is_array",
  "qjs_is_array_buffer",
  "qjs_is_big_int",
  "qjs_is_bool",
  "qjs_is_data_view",
  "qjs_is_date",
  "qjs_is_error",
  "qjs_is_exception",
  "qjs_is_function",
  "qjs_is_job_pending",
  "qjs_is_map",
  "qjs_is_null",
  "qjs_is_number",
  "qjs_is_object",
  "qjs_is_promise",
  "qjs_is_proxy",
  "qjs_is_regexp",
  "qjs_is_set",
  "qjs_is_string",
  "qjs_is_symbol",
  "qjs_is_uncatchable_error",
  "qjs_is_undefined",
  "qjs_is_weak_map",
  "qjs_is_weak_ref",
  "qjs_is_weak_set",
  "qjs_new_array",
  "qjs_new_array_buffer",
  "qjs_new_big_int64",
  "qjs_new_error",
  "qjs_new_host_function",
  "qjs_new_number",
  "qjs_new_object",
  "qjs_new_promise",
  "qjs_new_string",
  "qjs_new_symbol",
  "qjs_new_uint8_array",
  "qjs_promise_mark_as_handled",
  "qjs_promise_result",
  "qjs_promise_state",
  "qjs_promise_then",
  "qjs_property_is_enumerable",
  "qjs_property_is_enumerable_value",
  "qjs_run_gc",
  "qjs_set_gc_threshold",
  "qjs_set_interrupt_handler",
  "qjs_set_max_stack_size",
  "qjs_set_memory_limit",
  "qjs_set_module_loader",
  "qjs_set_promise_rejection_handler",
  "qjs_set_prop_string",
  "qjs_set_prop_uint32",
  "qjs_set_prop_value",
  "qjs_set_runtime_and_context",
  "qjs_throw",
  "round",
  "wasm_free",
  "wasm_malloc",
]);

const EXPORT_SECTION = 7;
const FUNCTION_EXPORT = 0;

/** Reads an unsigned LEB128 at `at`; returns [value, next offset], or null past the end or beyond 32 bits. */
function readU32(bytes: Uint8Array, at: number): [number, number] | null {
  let value = 0;
  for (let shift = 0, pos = at; shift < 35; shift += 7, pos++) {
    if (pos >= bytes.length) return null;
    const byte = bytes[pos] as number;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return value > 0xffff_ffff ? null : [value, pos + 1];
  }
  return null;
}

/** `value` as an unsigned LEB128 of exactly `width` bytes (wasm accepts padded encodings up to 5 bytes). */
function writePaddedU32(bytes: Uint8Array, at: number, value: number, width: number): void {
  let rest = value;
  for (let index = 0; index < width; index++) {
    const low = rest & 0x7f;
    rest = Math.floor(rest / 128);
    bytes[at + index] = index < width - 1 ? low | 0x80 : low;
  }
}

/**
 * An export's name when it is plain ASCII, as every name quickjs-wasi calls is; null otherwise (so no
 * decoder is set up for the few hundred names read here).
 */
function asciiName(bytes: Uint8Array, start: number, end: number): string | null {
  let name = "";
  for (let at = start; at < end; at++) {
    const byte = bytes[at] as number;
    if (byte >= 0x80) return null;
    name += String.fromCharCode(byte);
  }
  return name;
}

/** A custom section with an empty name takes at least this many bytes: id, a 5-byte size, the name's length. */
const PADDING_HEADER = 7;

/**
 * Rewrites a wasm binary's export section in place so that it keeps every non-function export and the
 * functions `keep` accepts; returns whether it changed anything. The section keeps its place and length:
 * the kept entries move up, and the bytes they free become a custom section (which every engine skips), so
 * nothing after it moves. Why in place: a new copy of the whole binary is fresh memory to fault in, on the
 * main thread on the way to the first worker's `init`, which costs far more than reading the section.
 * Anything this reader does not follow (not a wasm binary, a section that overruns, an
 * export kind it does not know, a name that is not ASCII) leaves the bytes untouched, so the compile
 * reports the problem exactly as it would have.
 */
export function keepFunctionExports(bytes: Uint8Array, keep: (name: string) => boolean): boolean {
  const section = findExportSection(bytes);
  if (section === null) return false;
  const { start, bodyStart, end } = section;
  const count = readU32(bytes, bodyStart);
  if (count === null) return false;
  const entriesStart = count[1];
  // Read the whole section before writing anything: [start, end) of each entry to keep.
  const kept: number[] = [];
  let keptBytes = 0;
  let entry = entriesStart;
  for (let index = 0; index < count[0]; index++) {
    const nameLength = readU32(bytes, entry);
    if (nameLength === null || nameLength[1] + nameLength[0] + 1 > end) return false;
    const nameEnd = nameLength[1] + nameLength[0];
    const kind = bytes[nameEnd] as number;
    const target = readU32(bytes, nameEnd + 1);
    if (kind > 3 || target === null || target[1] > end) return false;
    const name = asciiName(bytes, nameLength[1], nameEnd);
    if (name === null) return false;
    if (kind !== FUNCTION_EXPORT || keep(name)) {
      kept.push(entry, target[1]);
      keptBytes += target[1] - entry;
    }
    entry = target[1];
  }
  const keptCount = kept.length / 2;
  if (entry !== end || keptCount === count[0]) return false;
  // Too few bytes freed to hold a custom section's header (one or two short entries): leave it be.
  const padding = end - entriesStart - keptBytes;
  if (padding < PADDING_HEADER) return false;
  // The section's size and the count keep their widths, so every kept entry moves to a lower offset.
  let at = entriesStart;
  for (let index = 0; index < kept.length; index += 2) {
    bytes.copyWithin(at, kept[index] as number, kept[index + 1] as number);
    at += (kept[index + 1] as number) - (kept[index] as number);
  }
  writePaddedU32(bytes, start + 1, at - bodyStart, bodyStart - start - 1);
  writePaddedU32(bytes, bodyStart, keptCount, entriesStart - bodyStart);
  // The padding: custom section id 0, its size in 5 bytes, an empty name, zeros.
  bytes[at] = 0;
  writePaddedU32(bytes, at + 1, padding - 6, 5);
  bytes[at + 6] = 0;
  bytes.fill(0, at + PADDING_HEADER, end);
  return true;
}

/** Where a wasm binary's export section lies (its id byte, body, end), or null if there is none or the binary cannot be followed. */
function findExportSection(bytes: Uint8Array): { start: number; bodyStart: number; end: number } | null {
  const header = [0x00, 0x61, 0x73, 0x6d];
  if (bytes.length < 8 || header.some((byte, index) => bytes[index] !== byte)) return null;
  let start = 8;
  while (start < bytes.length) {
    const size = readU32(bytes, start + 1);
    if (size === null) return null;
    const end = size[1] + size[0];
    if (end > bytes.length) return null;
    if (bytes[start] === EXPORT_SECTION) return { start, bodyStart: size[1], end };
    start = end;
  }
  return null;
}
