import { randomFillSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { CODE_MODE_LIMITS } from "@codecell/contract/errors";
import { QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { afterAll, describe, expect, it } from "vitest";
import type { SandboxLimits } from "../src/index.js";
import { loadShippedForWasm, verifyShippedForWasm } from "../src/prelude-bytecode.js";
import { defaultWasmPath, loadQuickJsModule } from "../src/wasm-module.js";
import { runVmOptions, shippedImageOf, VmImage } from "../src/worker/vm-image.js";
import { limits, surface, workerMessages } from "./helpers.js";

// The build ships the image of a fresh VM beside the prelude's bytecode (for a worker's cold start): a worker
// makes its VMs of the default memory limit from it, its first one included, instead of running
// QuickJS's start-up and the bytecode in wasm V8 has not compiled yet. These tests check that the host
// hands it over only when its bytes are the build's, that the worker refuses one whose layout does not
// add up, and that every VM made from it is a fresh VM of its own (seed, time origin, globals).

const DIST = new URL("../dist/worker/", import.meta.url);
const DIST_WORKERS = [new URL("sandbox-worker.js", DIST), new URL("sandbox-worker.bundle.cjs", DIST)];
const MANIFEST = new URL("guest-prelude.bytecode.json", DIST);
const manifestText = readFileSync(MANIFEST, "utf8");
const manifest = JSON.parse(manifestText) as { source: string; bytecode: string; image: { bytes: number } };
const shippedImage = new Uint8Array(readFileSync(new URL("fresh-vm.image", DIST)));
const shippedBytecode = new Uint8Array(Buffer.from(manifest.bytecode, "base64"));
const wasmBytes = new Uint8Array(readFileSync(defaultWasmPath()));
const wasmModule = (await loadQuickJsModule()) as QuickJSOptions["wasm"];
const DEFAULT_LIMIT = CODE_MODE_LIMITS.memoryLimitBytes.default;
const randomFill = (target: Uint8Array) => {
  randomFillSync(target);
};
const wasi = (memory: { buffer: ArrayBuffer }) => ({
  random_get(pointer: number, length: number) {
    randomFillSync(new Uint8Array(memory.buffer, pointer, length));
    return 0;
  },
});

/** The image of a fresh default-limit VM given the shipped bytecode, after `extra` ran in it (if any). */
async function imageOf(extra?: string): Promise<Uint8Array> {
  const vm = await QuickJS.create(runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never));
  try {
    const prelude = vm.evalBytecode(shippedBytecode);
    if (extra !== undefined) vm.evalCode(extra).dispose();
    const image = VmImage.capture(vm, randomFill);
    if (image === null) throw new Error("no image");
    return image.serialize({ memoryLimit: DEFAULT_LIMIT, preludePointer: prelude.ptr });
  } finally {
    vm.dispose();
  }
}

/** JSON text of `code`'s value in `vm`. */
function read(vm: QuickJS, code: string): unknown {
  const result = vm.evalCode(code);
  try {
    return JSON.parse(result.toString());
  } finally {
    result.dispose();
  }
}

describe("the fresh VM image shipped in dist", () => {
  it("rides with the prelude's bytecode only when its bytes hash as the manifest records", () => {
    const shipped = loadShippedForWasm(wasmBytes, undefined, MANIFEST).prelude;
    expect(shipped?.image?.length).toBe(manifest.image.bytes);
    expect(shipped?.image).toEqual(shippedImage);
    const damaged = new Uint8Array(shippedImage);
    damaged[damaged.length >> 1] = (damaged[damaged.length >> 1] ?? 0) ^ 0x01;
    const refused = verifyShippedForWasm(manifestText, wasmBytes, undefined, damaged).prelude;
    // The bytecode still goes; the image does not.
    expect(refused?.bytecode.length).toBeGreaterThan(0);
    expect(refused?.image).toBeUndefined();
    expect(verifyShippedForWasm(manifestText, wasmBytes, undefined, null).prelude?.image).toBeUndefined();
    const unrecorded = JSON.stringify({ ...JSON.parse(manifestText), image: undefined });
    expect(
      verifyShippedForWasm(unrecorded, wasmBytes, undefined, shippedImage).prelude?.image,
    ).toBeUndefined();
  });

  it("is the same bytes from every build of the same source: the shipped image is the one made now", async () => {
    // Made in different milliseconds: an image that kept anything its VM took from the clock or from
    // entropy as it was made would differ from the other, and from the build's (made on another run).
    const first = await shippedImageOf(wasmModule, shippedBytecode, DEFAULT_LIMIT);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await shippedImageOf(wasmModule, shippedBytecode, DEFAULT_LIMIT);
    expect(Buffer.compare(first, second)).toBe(0);
    expect(Buffer.compare(first, shippedImage)).toBe(0);
    // And it is a fresh VM's image like any other: a VM made from it starts from its own clock reading.
    const made = VmImage.deserialize(first, randomFill);
    expect(made).not.toBeNull();
    const vm = await made?.image.instantiate(
      runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never),
    );
    try {
      const origin = vm === undefined ? 0 : (read(vm, "performance.timeOrigin") as number);
      expect(Math.abs(origin - Date.now())).toBeLessThan(5_000);
    } finally {
      vm?.dispose();
    }
  });

  it("reads back as the image it was written from, and refuses bytes whose layout does not add up", async () => {
    const bytes = await imageOf();
    const read = VmImage.deserialize(bytes, randomFill);
    expect(read?.memoryLimit).toBe(DEFAULT_LIMIT);
    expect(
      read?.image.serialize({ memoryLimit: DEFAULT_LIMIT, preludePointer: read.preludePointer }),
    ).toEqual(bytes);
    const word = (index: number, value: number) => {
      const copy = new Uint8Array(bytes);
      new DataView(copy.buffer).setUint32(index * 4, value, true);
      return copy;
    };
    const memoryBytes = new DataView(bytes.buffer, bytes.byteOffset).getUint32(8, true);
    const pageCount = new DataView(bytes.buffer, bytes.byteOffset).getUint32(13 * 4, true);
    const firstPageWord = 14 + 5;
    const secondPage = new DataView(bytes.buffer, bytes.byteOffset).getUint32((firstPageWord + 1) * 4, true);
    for (const broken of [
      word(0, 0x12345678), // another magic
      word(1, 2), // another layout version
      word(2, memoryBytes + 4096), // not whole wasm pages
      word(2, 0),
      word(4, memoryBytes + 8), // the stack pointer outside the memory
      word(7, 0), // no prelude function
      word(8, memoryBytes - 4), // the seed's place not inside
      word(9, 12), // the time origin's place not aligned
      word(13, pageCount + 1), // a page more than the bytes hold
      word(firstPageWord, secondPage), // pages out of order
      word(firstPageWord + pageCount - 1, memoryBytes / 4096), // a page past the memory's end
      bytes.subarray(0, bytes.length - 1), // truncated
      new Uint8Array(12),
    ]) {
      expect(VmImage.deserialize(broken, randomFill)).toBeNull();
    }
  });

  it("gives a new instance, and a used VM it resets, the image's memory byte for byte but the seed and time origins", async () => {
    const shipped = VmImage.deserialize(shippedImage, randomFill);
    const { image } = shipped as NonNullable<typeof shipped>;
    const blanked = (bytes: Uint8Array) => {
      const copy = new Uint8Array(bytes);
      for (const at of [image.places.seedAt, image.places.originAt, image.places.timeOriginAt])
        copy.fill(0, at, at + 8);
      return copy;
    };
    const expected = blanked(image.memory);
    // Several: the pages a new instance starts with (its data segments) are found on the first only.
    for (let index = 0; index < 3; index++) {
      const vm = await image.instantiate(runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never));
      try {
        const exports = vm._getExports() as unknown as { memory: { buffer: ArrayBuffer } };
        const memory = new Uint8Array(exports.memory.buffer);
        expect(memory.byteLength).toBe(expected.byteLength);
        expect(Buffer.compare(blanked(memory), expected)).toBe(0);
      } finally {
        vm.dispose();
      }
    }
    // A used VM reset to the image: the same bytes again, though its run wrote and freed pages the image
    // has as zeros (freed memory keeps what was written) and never wrote others.
    const used = await image.instantiate(runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never));
    try {
      read(
        used,
        "JSON.stringify((() => { const kept = []; for (let i = 0; i < 1000; i++) kept.push('x'.repeat(100) + i); return kept.length; })())",
      );
      expect(image.fits(used)).toBe(true);
      const exports = used._getExports() as unknown as { memory: { buffer: ArrayBuffer } };
      expect(Buffer.compare(blanked(new Uint8Array(exports.memory.buffer)), expected)).not.toBe(0);
      image.reset(used);
      expect(Buffer.compare(blanked(new Uint8Array(exports.memory.buffer)), expected)).toBe(0);
    } finally {
      used.dispose();
    }
    // An image whose page of QuickJS's static data is all zeros (no real image is): the new instance's
    // data segments there must not show through. Memory only; no code runs in it.
    const staticPage = 1048576 / 4096;
    const zeroed = new Uint8Array(image.memory);
    zeroed.fill(0, staticPage * 4096, (staticPage + 1) * 4096);
    const crafted = new VmImage(zeroed, image, image.places, image.cached, randomFill);
    const vm = await crafted.instantiate(runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never));
    try {
      const exports = vm._getExports() as unknown as { memory: { buffer: ArrayBuffer } };
      const page = new Uint8Array(exports.memory.buffer, staticPage * 4096, 4096);
      expect(image.memory[staticPage * 4096]).not.toBe(0);
      expect(page.every((byte) => byte === 0)).toBe(true);
    } finally {
      vm.dispose();
    }
  });

  it("makes VMs that are fresh ones, each with its own Math.random sequence and time origin", async () => {
    const shipped = VmImage.deserialize(shippedImage, randomFill);
    expect(shipped).not.toBeNull();
    const { image } = shipped as NonNullable<typeof shipped>;
    const seen = new Set<number>();
    for (let index = 0; index < 6; index++) {
      const vm = await image.instantiate(runVmOptions(wasmModule, DEFAULT_LIMIT, () => false, wasi as never));
      try {
        const [random, origin, now, leftBehind] = read(
          vm,
          "JSON.stringify([Math.random(), performance.timeOrigin, Date.now(), typeof leftBehind])",
        ) as [number, number, number, string];
        seen.add(random);
        // The image was made at build time; a VM made from it now has now's time origin.
        expect(Math.abs(origin - now)).toBeLessThan(5_000);
        expect(leftBehind).toBe("undefined");
        read(vm, "JSON.stringify(globalThis.leftBehind = 1)");
      } finally {
        vm.dispose();
      }
    }
    expect(seen.size).toBe(6);
  });
});

describe.each(DIST_WORKERS.map((url) => [url.pathname.replace(/.*\/dist\//, "dist/"), url]))(
  "the built worker %s",
  (_name, workerUrl) => {
    const workers: Worker[] = [];
    afterAll(() => Promise.all(workers.map((worker) => worker.terminate())));
    const defaultLimits: SandboxLimits = { ...limits, memoryLimitBytes: DEFAULT_LIMIT };

    /** A worker given the shipped bytecode with `image`, and a function running one cell on it. */
    async function workerWith(image: Uint8Array | undefined) {
      const worker = new Worker(workerUrl, { execArgv: [] });
      workers.push(worker);
      const { next } = workerMessages(worker);
      const prelude = { source: manifest.source, bytecode: shippedBytecode, ...(image && { image }) };
      worker.postMessage({ type: "init", module: wasmModule, snapshotSecret: null, prelude });
      expect(await next("ready")).toMatchObject({ type: "ready" });
      let runs = 0;
      return async (code: string, runLimits = defaultLimits): Promise<unknown> => {
        const runId = `r${++runs}`;
        worker.postMessage({
          type: "start",
          runId,
          code,
          language: "javascript",
          surface: JSON.stringify(surface),
          limits: runLimits,
          deadlineAt: Date.now() + 60_000,
          signal: new Int32Array(new SharedArrayBuffer(4)),
        });
        const outcome = await next("completed", runId);
        expect(outcome).toMatchObject({ type: "completed" });
        return outcome.value;
      };
    }

    it("makes every VM of the image's memory limit from the image, and only those", async () => {
      // An image whose VM has a mark a cell can see: a cell that sees it ran in a VM made from it.
      const run = await workerWith(await imageOf("globalThis.imageMark = 'image'"));
      for (let cell = 0; cell < 4; cell++) expect(await run("return typeof imageMark")).toBe("string");
      // Another memory limit: VMs made by QuickJS's start-up, as before.
      expect(await run("return typeof imageMark", limits)).toBe("undefined");
    });

    it("hands every run a fresh VM made from the image: globals, Math.random and time origin its own", async () => {
      const code =
        "const seen = [typeof leftBehind, typeof [].polluted, Math.random(), performance.timeOrigin - Date.now()]; globalThis.leftBehind = 1; Array.prototype.polluted = 1; return seen;";
      const values: unknown[][] = [];
      for (const run of [await workerWith(shippedImage), await workerWith(shippedImage)]) {
        for (let cell = 0; cell < 3; cell++) values.push((await run(code)) as unknown[]);
      }
      for (const [leftBehind, polluted, , originLag] of values) {
        expect(leftBehind).toBe("undefined");
        expect(polluted).toBe("undefined");
        expect(Math.abs(originLag as number)).toBeLessThan(5_000);
      }
      // Two workers made from one image, three VMs each: six sequences.
      expect(new Set(values.map((value) => value[2])).size).toBe(6);
    });

    it("refuses an image whose layout does not add up and makes its VMs as before", async () => {
      const broken = new Uint8Array(await imageOf("globalThis.imageMark = 'image'"));
      broken[0] = (broken[0] ?? 0) ^ 0xff;
      const run = await workerWith(broken);
      expect(await run("return [typeof imageMark, 1 + 1]")).toEqual(["undefined", 2]);
    });
  },
);
