// Single-thread cost of the guest side of one nested call: the prelude, quickjs-wasi and QuickJS,
// with the host answering at once in this thread (no worker, no channel). Prints CPU µs per call
// (this thread's schedstat). `GUEST_PRELUDE=<path to another guest-prelude.js>` compares a variant.
import { readFileSync } from "node:fs";
import { QuickJS } from "quickjs-wasi";

const { GUEST_PRELUDE_SOURCE } = await import(
  process.env.GUEST_PRELUDE ?? "../../packages/sandbox/src/worker/guest-prelude.js"
);

const CALLS = Number(process.env.GUEST_CALLS ?? 20000);
const surface = JSON.stringify({
  allTools: [{ id: "core:bench:inc", name: "inc", description: "Add one", source: "core" }],
  toolFunctions: [{ name: "inc", toolId: "core:bench:inc" }],
  mcpServers: [],
  apiFiles: [],
  namespaces: [],
});

import { createRequire } from "node:module";

const wasm = new WebAssembly.Module(
  readFileSync(createRequire(import.meta.url).resolve("quickjs-wasi/quickjs.wasm")),
);
const threadNanos = () => Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);

async function once(label, mode, source = GUEST_PRELUDE_SOURCE) {
  const vm = await QuickJS.create({ wasm, memoryLimit: 64 << 20, interruptHandler: () => false });
  let next = 0;
  const queue = [];
  const host = vm.newFunction("codecellHost", (...args) => {
    // A request is the one call with a single argument; its reply is the request's number.
    if (args.length === 1) {
      const text = args[0].toString();
      if (mode === "parse") JSON.parse(text);
      const id = ++next;
      queue.push(id);
      return vm.newNumber(id);
    }
    const op = args[0].toString();
    if (op === "done") queue.push(`done:${args[1].toString()}`);
    if (op === "fail") queue.push(`fail:${args[1].toString()}`);
    return vm.newString("");
  });
  const prelude = vm.evalCode(source, "prelude.js");
  const surfaceHandle = vm.newString(surface);
  const control = vm.callFunction(prelude, vm.undefined, host, surfaceHandle);
  const cell = vm.evalCode(
    `(async function () { let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await tools.inc({ value: 1 }); return s; })`,
    "cell.js",
  );
  const started = threadNanos();
  const toHandle = (arg) =>
    typeof arg === "string" ? vm.newString(arg) : typeof arg === "number" ? vm.newNumber(arg) : arg;
  const call = (...args) => {
    const handles = args.map(toHandle);
    const result = vm.callFunction(control, vm.undefined, ...handles);
    const reply = result.toString();
    result.dispose();
    for (let i = 0; i < handles.length; i++) if (handles[i] !== args[i]) handles[i].dispose();
    return reply;
  };
  call("start", cell);
  vm.executePendingJobs();
  let settled = 0;
  for (;;) {
    const item = queue.shift();
    if (item === undefined || typeof item !== "number") {
      if (item !== `done:${CALLS}`) throw new Error(String(item));
      break;
    }
    call("settle", item, "1", "1");
    settled++;
    vm.executePendingJobs();
  }
  const micros = (threadNanos() - started) / 1000 / settled;
  console.log(`${label}: ${micros.toFixed(2)} µs CPU per call`);
  vm.dispose();
}
await once("guest, prelude and glue", "");
await once("guest, prelude and glue", "");
await once("... plus JSON.parse of the body", "parse");
