import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { loadPreludeBytecode, type PreludeBytecode } from "./prelude-bytecode.js";
import { keepFunctionExports, QUICKJS_EXPORTS_USED } from "./wasm-exports.js";

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
 * only the functions quickjs-wasi calls (src/wasm-exports.ts), so no instance builds wrappers for the rest.
 */
export function loadQuickJsModule(location?: URL | string): Promise<CompiledModule> {
  const path =
    location === undefined ? defaultWasmPath() : location instanceof URL ? fileURLToPath(location) : location;
  let promise = compiled.get(path);
  if (promise === undefined) {
    promise = readFile(path).then(async (bytes) => {
      const [module, prelude] = await Promise.all([
        wasmApi.compile(keepFunctionExports(bytes, (name) => QUICKJS_EXPORTS_USED.has(name))),
        loadPreludeBytecode(bytes),
      ]);
      preludes.set(module, prelude);
      return module;
    });
    compiled.set(path, promise);
    // A failed load is not cached, so a later pool can try again (the file may have been restored).
    promise.catch(() => compiled.delete(path));
  }
  return promise;
}

/**
 * The shipped prelude bytecode to send a worker with this module in `init`: null unless it was built
 * for exactly this wasm and its hashes check out (src/prelude-bytecode.ts).
 */
export function preludeFor(module: CompiledModule): PreludeBytecode | null {
  return preludes.get(module) ?? null;
}
