// The floor: bare quickjs-wasi in this thread, a fresh VM per run, no worker, no bridge of ours. Host
// tools are host functions returning promises (`hostToHandle` turns a host promise into a guest one and
// drains the job queue when it settles). `json: true` is floor-json: inputs and results cross as JSON
// text that the guest parses, the way codecell's bridge carries them.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { benchTools } from "./bench-tools.mjs";

// quickjs-wasi is the sandbox package's dependency (gateway -> engine -> sandbox); resolve it from
// there so the floor runs the very same build and wasm as codecell.
const requireFromEngine = createRequire(createRequire(import.meta.url).resolve("@codecell/engine"));
const requireFromSandbox = createRequire(requireFromEngine.resolve("@codecell/sandbox"));
const quickjsEntry = requireFromSandbox.resolve("quickjs-wasi");

export async function loadFloor() {
  const { QuickJS } = await import(quickjsEntry);
  const wasmPath = requireFromSandbox.resolve("quickjs-wasi/quickjs.wasm");
  const wasm = await WebAssembly.compile(readFileSync(wasmPath));
  return { QuickJS, wasm };
}

const PRELUDE_VALUES =
  "globalThis.tools = { inc: (x) => call('inc', x), sleep50: (x) => call('sleep50', x), items: (x) => call('items', x) };";
const PRELUDE_JSON =
  "globalThis.tools = Object.fromEntries(['inc', 'sleep50', 'items'].map((n) => [n, async (x) => JSON.parse(await call(n, JSON.stringify(x)))]));";

/** Runs one cell body to its result in a fresh VM. */
export async function floorRun({ QuickJS, wasm }, code, json) {
  const vm = await QuickJS.create({
    wasm,
    memoryLimit: 64 << 20,
    maxStackSize: 256 * 1024,
    timezoneOffset: 0,
  });
  try {
    const call = vm.newFunction("call", (nameHandle, inputHandle) => {
      const name = nameHandle.toString();
      if (json) {
        const input = JSON.parse(inputHandle.toString());
        return vm.hostToHandle(benchTools[name](input).then((value) => JSON.stringify(value)));
      }
      return vm.hostToHandle(benchTools[name](vm.dump(inputHandle)));
    });
    vm.global.setProp("call", call);
    call.dispose();
    vm.evalCode(json ? PRELUDE_JSON : PRELUDE_VALUES).dispose();
    const body = `(async () => { ${code}\n})()`;
    const promise = vm.evalCode(json ? `(async () => JSON.stringify(await ${body}))()` : body, "cell.js");
    vm.executePendingJobs();
    const settled = await vm.resolvePromise(promise);
    promise.dispose();
    if ("error" in settled) {
      const error = vm.dump(settled.error);
      settled.error.dispose();
      throw new Error(`floor cell failed: ${JSON.stringify(error)}`);
    }
    const value = vm.dump(settled.value);
    settled.value.dispose();
    return json ? JSON.parse(value) : value;
  } finally {
    vm.dispose();
  }
}

/**
 * The floor of a one-shot command: the text of a `node -e` program that imports quickjs-wasi, compiles
 * its wasm, runs `code` as a cell body in a fresh VM and prints the result as JSON, what `codecell exec`
 * does for a cell, with nothing of codecell's around it (no worker, no config, no catalog).
 */
export function bareExecProgram(code) {
  const wasmPath = requireFromSandbox.resolve("quickjs-wasi/quickjs.wasm");
  return `import(${JSON.stringify(quickjsEntry)}).then(async ({ QuickJS }) => {
  const { readFileSync } = await import("node:fs");
  const wasm = await WebAssembly.compile(readFileSync(${JSON.stringify(wasmPath)}));
  const vm = await QuickJS.create({ wasm, memoryLimit: 64 << 20, maxStackSize: 256 * 1024, timezoneOffset: 0 });
  const promise = vm.evalCode(${JSON.stringify(`(async () => { ${code}\n})()`)}, "cell.js");
  vm.executePendingJobs();
  const settled = await vm.resolvePromise(promise);
  promise.dispose();
  const value = vm.dump("error" in settled ? settled.error : settled.value);
  ("error" in settled ? settled.error : settled.value).dispose();
  vm.dispose();
  process.stdout.write(JSON.stringify({ status: "error" in settled ? "failed" : "completed", value }, null, 2) + "\\n");
});`;
}
