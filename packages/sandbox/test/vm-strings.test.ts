import { QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadQuickJsModule } from "../src/wasm-module.js";
import { VmStrings } from "../src/worker/vm-strings.js";

/**
 * The worker's short and long ways of moving strings into a VM (VmStrings) must carry every string
 * exactly, as the library's own path does: lone surrogates as WTF-8, NUL, text past the scratch area.
 */
let vm: QuickJS;
let strings: VmStrings;

beforeAll(async () => {
  // The module as the pool compiles it (typed opaquely: this project's lib has no WebAssembly types).
  const wasm = (await loadQuickJsModule()) as QuickJSOptions["wasm"];
  vm = await QuickJS.create({ wasm, memoryLimit: 32 << 20, maxStackSize: 256 * 1024, timezoneOffset: 0 });
  strings = new VmStrings(vm);
});

afterAll(() => {
  strings.release();
  vm.dispose();
});

const long = (text: string) => `${"x".repeat(2000)}${text}${"y".repeat(700)}`;

describe("VmStrings", () => {
  it.each([
    ["short ASCII", "hello"],
    ["short non-ASCII", "é and 😀"],
    ["short lone surrogate", "a\ud800b"],
    ["long ASCII", long("")],
    ["long non-ASCII", long("é, 😀, \u4e2d")],
    ["long with NUL", long("\u0000 in the middle \u0000")],
    ["long with a lone high surrogate", long("\ud800")],
    ["long with a lone low surrogate", long("\udfff end")],
    ["long well-formed pair", long("\ud83d\ude00")],
  ])("carries %s into the VM exactly", (_name, text) => {
    const handle = strings.newString(text);
    try {
      expect(handle.toString()).toBe(text);
      // As the guest sees it: its length in UTF-16 units and its last code unit, as on the host.
      vm.global.setProp("probe", handle);
      const seen = vm.evalCode("[probe.length, probe.charCodeAt(probe.length - 1)]");
      expect(vm.dump(seen)).toEqual([text.length, text.charCodeAt(text.length - 1)]);
      seen.dispose();
    } finally {
      handle.dispose();
    }
  });
});
