import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { verifyShippedForWasm } from "../src/prelude-bytecode.js";
import {
  defaultWasmPath,
  keepFunctionExports,
  loadQuickJsModule,
  QUICKJS_EXPORTS_USED,
} from "../src/wasm-module.js";

// The sandbox compiles quickjs.wasm with only the function exports quickjs-wasi calls (src/wasm-module.ts).
// A function quickjs-wasi needs but the list lacks would surface as "not a function" in whatever rare path
// calls it, so the list is checked against the installed library's source, not only against the tests.

type ModuleExport = { name: string; kind: string };
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
type WasmApi = {
  Module: {
    new (bytes: Uint8Array): object;
    exports(module: object): ModuleExport[];
    customSections(module: object, name: string): ArrayBuffer[];
  };
};

const original = new Uint8Array(readFileSync(defaultWasmPath()));
const originalExports = wasm.Module.exports(new wasm.Module(original));
const functionNames = originalExports.filter((e) => e.kind === "function").map((e) => e.name);
const keepUsed = (name: string) => QUICKJS_EXPORTS_USED.has(name);

/** Every JavaScript file quickjs-wasi ships (dist/*.js), as one text. */
function quickjsWasiSource(): string {
  const dist = dirname(createRequire(import.meta.url).resolve("quickjs-wasi"));
  return readdirSync(dist)
    .filter((file) => file.endsWith(".js"))
    .map((file) => readFileSync(join(dist, file), "utf8"))
    .join("\n");
}

describe("the function exports the sandbox keeps", () => {
  it("include every quickjs.wasm function the installed quickjs-wasi names anywhere", () => {
    const source = quickjsWasiSource();
    const named = functionNames.filter((name) =>
      new RegExp(`\\b${name.replace(/\$/g, "\\$")}\\b`).test(source),
    );
    // Sanity of the scan itself: the library is found and calls the functions every VM needs.
    expect(named).toEqual(expect.arrayContaining(["qjs_init", "qjs_eval", "qjs_call", "qjs_free_value"]));
    expect(named.filter((name) => !keepUsed(name))).toEqual([]);
  });

  it("are all functions quickjs.wasm exports (no stale or misspelt name)", () => {
    expect([...QUICKJS_EXPORTS_USED].filter((name) => !functionNames.includes(name))).toEqual([]);
    // What the filter is for: most of the C API goes.
    expect(functionNames.length - QUICKJS_EXPORTS_USED.size).toBeGreaterThan(300);
  });
});

describe("keepFunctionExports", () => {
  it("keeps the memory, table and globals and only the listed functions, in place, and compiles", () => {
    const filtered = original.slice();
    expect(keepFunctionExports(filtered, keepUsed)).toBe(true);
    const module = new wasm.Module(filtered);
    const exports = wasm.Module.exports(module);
    const others = (list: ModuleExport[]) => list.filter((e) => e.kind !== "function");
    expect(others(exports)).toEqual(others(originalExports));
    expect(exports.filter((e) => e.kind === "function").map((e) => e.name)).toEqual(
      functionNames.filter(keepUsed),
    );
    // Only the export section's bytes changed: what it freed is an unnamed custom section, and everything
    // before and after it (code, data) is where it was, byte for byte.
    expect(wasm.Module.customSections(module, "")).toHaveLength(1);
    const section = findSection(original, 7);
    expect(filtered.length).toBe(original.length);
    expect(Buffer.compare(filtered.subarray(0, section.start), original.subarray(0, section.start))).toBe(0);
    expect(Buffer.compare(filtered.subarray(section.end), original.subarray(section.end))).toBe(0);
  });

  it("leaves the bytes untouched when nothing would be dropped", () => {
    const copy = original.slice();
    expect(keepFunctionExports(copy, () => true)).toBe(false);
    expect(Buffer.compare(copy, original)).toBe(0);
  });

  it("leaves anything it cannot follow untouched, so the compile reports it as before", () => {
    const notWasm = new TextEncoder().encode("this is not a wasm binary");
    expect(keepFunctionExports(notWasm.slice(), keepUsed)).toBe(false);
    const compiles = (bytes: Uint8Array) => {
      try {
        new wasm.Module(bytes);
        return true;
      } catch {
        return false;
      }
    };
    // Cut anywhere, the result compiles exactly when the cut binary does (here: never).
    for (const length of [0, 4, 8, 9, 12, 100, 4096, 65_536, original.length - 1000, original.length - 1]) {
      const cut = original.slice(0, length);
      const copy = cut.slice();
      keepFunctionExports(copy, keepUsed);
      expect(compiles(copy)).toBe(compiles(cut));
    }
    // Corrupt the export section's declared count: untouched.
    const corrupt = original.slice();
    corrupt[findSection(original, 7).body] = 0x7f;
    const before = corrupt.slice();
    expect(keepFunctionExports(corrupt, keepUsed)).toBe(false);
    expect(Buffer.compare(corrupt, before)).toBe(0);
  });
});

// The build works the filtered export section out once and ships it in the prelude manifest
// (scripts/build-prelude-bytecode.mjs); a host writes those bytes instead of filtering at every start.
describe("the export filter shipped in dist", () => {
  const manifestText = readFileSync(
    new URL("../dist/worker/guest-prelude.bytecode.json", import.meta.url),
    "utf8",
  );
  const manifest = JSON.parse(manifestText) as Record<string, unknown> & {
    exportFilter: Record<string, unknown> & { bytes: string; offset: number };
  };
  const shipped = (text: string, bytes = original, kept: ReadonlySet<string> = QUICKJS_EXPORTS_USED) =>
    verifyShippedForWasm(text, bytes, kept).exportFilter;

  it("writes exactly the bytes keepFunctionExports writes", () => {
    const filter = shipped(manifestText);
    expect(filter).not.toBeNull();
    const patched = original.slice();
    patched.set(filter?.bytes ?? new Uint8Array(), filter?.offset ?? 0);
    const filtered = original.slice();
    expect(keepFunctionExports(filtered, keepUsed)).toBe(true);
    expect(Buffer.compare(patched, filtered)).toBe(0);
  });

  it("is refused when anything does not fit, so the host filters the section itself", () => {
    const edited = (change: Record<string, unknown>) =>
      JSON.stringify({ ...manifest, exportFilter: { ...manifest.exportFilter, ...change } });
    const bytes = Buffer.from(manifest.exportFilter.bytes, "base64");
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] ?? 0) ^ 0xff;
    // Damaged bytes (their hash no longer matches).
    expect(shipped(edited({ bytes: bytes.toString("base64") }))).toBeNull();
    // Made for another list of kept functions (one more kept here than at the build).
    const other = new Set([...QUICKJS_EXPORTS_USED, functionNames.find((name) => !keepUsed(name)) ?? ""]);
    expect(shipped(manifestText, original, other)).toBeNull();
    // Another QuickJS build (other wasm bytes), a place past the end, a missing or malformed filter.
    expect(shipped(manifestText, new Uint8Array([...original, 0]))).toBeNull();
    expect(shipped(edited({ offset: original.length }))).toBeNull();
    expect(shipped(edited({ offset: -1 }))).toBeNull();
    expect(shipped(JSON.stringify({ ...manifest, exportFilter: undefined }))).toBeNull();
    expect(shipped(edited({ bytes: 7 }))).toBeNull();
    // No list to check against: no filter (the prelude alone is asked for).
    expect(verifyShippedForWasm(manifestText, original).exportFilter).toBeNull();
    expect(verifyShippedForWasm(manifestText, original).prelude).not.toBeNull();
  });
});

describe("a VM on the filtered module", () => {
  it("evaluates, calls a host function, and survives a snapshot and restore", async () => {
    const module = (await loadQuickJsModule()) as QuickJSOptions["wasm"];
    expect(wasm.Module.exports(module as object).filter((e) => e.kind === "function").length).toBe(
      functionNames.filter(keepUsed).length,
    );
    const vm = await QuickJS.create({ wasm: module });
    const twice = vm.newFunction("twice", (value) => vm.newNumber(value.toNumber() * 2));
    vm.setProp(vm.global, "twice", twice);
    twice.dispose();
    vm.evalCode("globalThis.kept = [1, 2, 3].map((n) => twice(n)).join(',')").dispose();
    const snapshot = vm.snapshot();
    vm.dispose();
    const restored = await QuickJS.restore(snapshot, { wasm: module });
    const value = restored.evalCode("kept + ':' + JSON.stringify({ a: 1n.toString() })");
    expect(restored.dump(value)).toBe('2,4,6:{"a":"1"}');
    value.dispose();
    restored.dispose();
  });
});

function findSection(bytes: Uint8Array, id: number): { start: number; body: number; end: number } {
  let pos = 8;
  while (pos < bytes.length) {
    let size = 0;
    let shift = 0;
    let at = pos + 1;
    for (;;) {
      const byte = bytes[at++] as number;
      size += (byte & 0x7f) * 2 ** shift;
      shift += 7;
      if ((byte & 0x80) === 0) break;
    }
    if (bytes[pos] === id) return { start: pos, body: at, end: at + size };
    pos = at + size;
  }
  throw new Error(`no section ${id}`);
}
