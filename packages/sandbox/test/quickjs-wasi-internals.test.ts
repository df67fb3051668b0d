import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { loadQuickJsModule } from "../src/wasm-module.js";
import {
  libraryOf,
  linearMemoryOf,
  QUICKJS_WASI_VERSION,
  wasmExportsOf,
} from "../src/worker/quickjs-wasi-internals.js";

// src/worker/quickjs-wasi-internals.js reaches past quickjs-wasi's public API for one version: an update
// must fail here, saying what to review, before a reset VM or a dropped VM's memory goes wrong quietly.

const REVIEW = "review src/worker/quickjs-wasi-internals.js and its users (vm-image.js, vm-pool.js)";
const packageJson = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  dependencies: Record<string, string>;
};
const installed = (
  JSON.parse(readFileSync(createRequire(import.meta.url).resolve("quickjs-wasi/package.json"), "utf8")) as {
    version: string;
  }
).version;

describe("quickjs-wasi internals", () => {
  it("are used with the version they were written for, pinned exactly", () => {
    expect(packageJson.dependencies["quickjs-wasi"], `pin quickjs-wasi exactly; ${REVIEW}`).toBe(
      QUICKJS_WASI_VERSION,
    );
    expect(installed, `quickjs-wasi ${installed} is installed; ${REVIEW} for it`).toBe(QUICKJS_WASI_VERSION);
  });

  it("are all there on a VM made from the sandbox's compiled module", async () => {
    const vm = await QuickJS.create({ wasm: (await loadQuickJsModule()) as QuickJSOptions["wasm"] });
    try {
      const exports = wasmExportsOf(vm);
      expect(
        typeof exports.memory?.grow,
        `quickjs-wasi ${installed} has no wasm memory export; ${REVIEW}`,
      ).toBe("function");
      expect(exports.memory.buffer.byteLength).toBeGreaterThan(0);
      expect(typeof exports.__stack_pointer?.value, `no __stack_pointer global; ${REVIEW}`).toBe("number");
      expect(typeof exports.wasm_malloc, `no wasm_malloc export; ${REVIEW}`).toBe("function");
      expect(typeof exports.wasm_free, `no wasm_free export; ${REVIEW}`).toBe("function");
      expect(linearMemoryOf(vm)).toBe(exports.memory);
      expect(libraryOf(vm)).toBe(vm);
    } finally {
      vm.dispose();
    }
    // A disposed VM has no memory left to account for (dropVm relies on this).
    expect(linearMemoryOf(vm)).toBeNull();
  });
});
