import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { CompileFlags, QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { afterAll, describe, expect, it } from "vitest";
import { loadShippedForWasm, verifyShippedForWasm } from "../src/prelude-bytecode.js";
import { defaultWasmPath, loadQuickJsModule } from "../src/wasm-module.js";
import { limits, surface, workerMessages } from "./helpers.js";

// The build compiles the guest prelude to bytecode once and ships it in dist (for a worker's cold start).
// These tests check what the file holds, that the host refuses it whenever it might not be ours or not
// fit, and that the built worker takes it only when it was compiled from its own prelude source.

// The worker script tsc builds, and the one-file CommonJS bundle of it that the built package starts
// (scripts/bundle-worker.mjs, with the prelude's text inlined): both must take the shipped bytecode.
const DIST_WORKERS = [
  new URL("../dist/worker/sandbox-worker.js", import.meta.url),
  new URL("../dist/worker/sandbox-worker.bundle.cjs", import.meta.url),
];
const MANIFEST = new URL("../dist/worker/guest-prelude.bytecode.json", import.meta.url);
const manifestText = readFileSync(MANIFEST, "utf8");
const manifest = JSON.parse(manifestText) as Record<string, unknown> & { source: string; bytecode: string };
const wasmBytes = new Uint8Array(readFileSync(defaultWasmPath()));
// The module as the pool compiles it (typed opaquely: this project's lib has no WebAssembly types).
const wasmModule = (await loadQuickJsModule()) as QuickJSOptions["wasm"];

async function compileIn(source: string): Promise<Uint8Array> {
  const vm = await QuickJS.create({ wasm: wasmModule });
  try {
    // The arguments of compileGuestPrelude (src/worker/guest-prelude.js).
    return vm.compile(source, "prelude.js", 0, CompileFlags.STRIP_SOURCE);
  } finally {
    vm.dispose();
  }
}

describe("the prelude bytecode shipped in dist", () => {
  it("is accepted for this package's quickjs.wasm", () => {
    const shipped = verifyShippedForWasm(manifestText, wasmBytes).prelude;
    expect(shipped).not.toBeNull();
    expect(shipped?.source).toBe(manifest.source);
    expect(shipped?.bytecode.length).toBeGreaterThan(1000);
  });

  it("is exactly what compiling its source in this wasm gives", async () => {
    const fresh = await compileIn(manifest.source);
    expect(Buffer.from(fresh).toString("base64")).toBe(manifest.bytecode);
  });

  it("is refused when anything does not fit", async () => {
    const edited = (change: Record<string, unknown>) => JSON.stringify({ ...manifest, ...change });
    const bytes = Buffer.from(manifest.bytecode, "base64");
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] ?? 0) ^ 0xff;
    // A damaged bytecode (its hash no longer matches).
    expect(
      verifyShippedForWasm(edited({ bytecode: bytes.toString("base64") }), wasmBytes).prelude,
    ).toBeNull();
    // Another QuickJS build (other wasm bytes).
    const otherWasm = new Uint8Array([...wasmBytes, 0]);
    expect(verifyShippedForWasm(manifestText, otherWasm).prelude).toBeNull();
    // A source edited after the hashes were written.
    expect(verifyShippedForWasm(edited({ source: `${manifest.source} ` }), wasmBytes).prelude).toBeNull();
    // Another layout, missing fields, not JSON at all, no file.
    expect(verifyShippedForWasm(edited({ format: 2 }), wasmBytes).prelude).toBeNull();
    expect(verifyShippedForWasm(edited({ bytecode: undefined }), wasmBytes).prelude).toBeNull();
    expect(verifyShippedForWasm("{", wasmBytes).prelude).toBeNull();
    expect(
      loadShippedForWasm(wasmBytes, undefined, new URL("./no-such-file.json", MANIFEST)).prelude,
    ).toBeNull();
    expect(loadShippedForWasm(wasmBytes, undefined, MANIFEST).prelude).not.toBeNull();
  });
});

describe.each(DIST_WORKERS.map((url) => [url.pathname.replace(/.*\/dist\//, "dist/"), url]))(
  "the built worker %s",
  (_name, workerUrl) => {
    // A prelude that differs from the real one only by a mark the cell can see: if the worker evaluates
    // this bytecode, `preludeMark` is defined.
    const marked = manifest.source.replace(
      "const globalObject = globalThis;",
      "const globalObject = globalThis; globalObject.preludeMark = 'shipped';",
    );
    const workers: Worker[] = [];
    afterAll(() => Promise.all(workers.map((worker) => worker.terminate())));

    /** Starts the built worker with this `prelude` in init and runs `return typeof preludeMark`. */
    async function markSeen(prelude: { source: string; bytecode: Uint8Array }): Promise<unknown> {
      const worker = new Worker(workerUrl, { execArgv: [] });
      workers.push(worker);
      const { next } = workerMessages(worker);
      worker.postMessage({ type: "init", module: wasmModule, snapshotSecret: null, prelude });
      expect(await next("ready")).toMatchObject({ type: "ready" });
      worker.postMessage({
        type: "start",
        runId: "r1",
        code: "return typeof preludeMark",
        language: "javascript",
        surface: JSON.stringify(surface),
        limits,
        deadlineAt: Date.now() + 60_000,
        signal: new Int32Array(new SharedArrayBuffer(4)),
      });
      const outcome = await next("completed");
      expect(outcome).toMatchObject({ type: "completed" });
      return outcome.value;
    }

    it("evaluates the shipped bytecode when it was compiled from its own prelude source", async () => {
      expect(await markSeen({ source: manifest.source, bytecode: await compileIn(marked) })).toBe("string");
    });

    it("compiles its own prelude when the shipped source is not exactly its own", async () => {
      expect(await markSeen({ source: marked, bytecode: await compileIn(marked) })).toBe("undefined");
    });
  },
);

describe("the bundled worker", () => {
  it("requires at boot only Node's own modules, and loads the rest on first use", () => {
    const text = readFileSync(DIST_WORKERS[1] as URL, "utf8");
    // quickjs-wasi, the bridge and the prelude are inside; nothing else is read as the worker boots.
    const required = [...new Set([...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]))];
    expect(required.every((specifier) => specifier?.startsWith("node:"))).toBe(true);
    expect(text).not.toMatch(/\bfrom\s*"quickjs-wasi"|require\("quickjs-wasi"\)/);
    // Loaded on first use only (`x ??= import(...)`; the bundle is minified).
    expect([...text.matchAll(/\?\?=\s*import\("([^"]+)"\)/g)].map((match) => match[1]).sort()).toEqual([
      "./snapshot-codec.js",
      "@codecell/transpile",
    ]);
  });

  it("loads the cell checker and the snapshot codec beside it on first use, with import() from CommonJS", async () => {
    const worker = new Worker(DIST_WORKERS[1] as URL, { execArgv: [] });
    try {
      const { next } = workerMessages(worker);
      const start = (runId: string, code: string, language: string) =>
        worker.postMessage({
          type: "start",
          runId,
          code,
          language,
          surface: JSON.stringify(surface),
          limits,
          deadlineAt: Date.now() + 60_000,
          signal: new Int32Array(new SharedArrayBuffer(4)),
        });
      worker.postMessage({ type: "init", module: wasmModule, snapshotSecret: "s".repeat(32), prelude: null });
      expect(await next("ready")).toMatchObject({ type: "ready" });
      // TypeScript goes through @codecell/transpile (sucrase), imported on first use.
      start("ts", "const answer: number = 6 * 7; return answer", "typescript");
      expect(await next("completed", "ts")).toMatchObject({ type: "completed", value: 42 });
      // A suspend goes through ./snapshot-codec.js (zlib, crypto), imported on first use.
      start("suspend", "await yield_control('later'); return 1", "javascript");
      expect(await next("idle", "suspend")).toMatchObject({ type: "idle" });
      worker.postMessage({ type: "suspend", runId: "suspend" });
      const suspended = await next("suspended", "suspend");
      expect(suspended).toMatchObject({ type: "suspended" });
      expect(suspended.snapshot).toBeInstanceOf(Uint8Array);
    } finally {
      await worker.terminate();
    }
  });

  it("holds the prelude's source exactly as the shipped bytecode was compiled from it", () => {
    // A string literal the build wrote from dist/worker/guest-prelude.js; the build checks it too.
    const text = readFileSync(DIST_WORKERS[1] as URL, "utf8");
    const literal = /\bGUEST_PRELUDE_SOURCE\s*=\s*(("|'|`)(?:[^\\]|\\.)*?\2)/s.exec(text)?.[1];
    expect(literal).toBeDefined();
    expect(new Function(`return ${literal};`)()).toBe(manifest.source);
  });
});
