// What the export filter (src/wasm-module.ts, keepFunctionExports) saves per fresh VM:
// `node bench/sandbox/vm-exports.mjs` after a build. The module with all 451 function exports and the filtered
// one are alternated in one process: the V8 heap each live VM holds (a batch of VMs kept alive after a
// forced GC; the wasm instance and quickjs-wasi's own objects), and the thread's CPU per `QuickJS.create`
// + a trivial eval + `dispose` (schedstat, medians over batches).
// Writes bench-results/vm-exports.json. VM_BATCHES and VM_PER_BATCH set the batches and VMs per batch.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { QuickJS } from "quickjs-wasi";
import {
  defaultWasmPath,
  keepFunctionExports,
  QUICKJS_EXPORTS_USED,
} from "../../packages/sandbox/dist/wasm-module.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc");
const here = fileURLToPath(new URL(".", import.meta.url));
const BATCHES = Number(process.env.VM_BATCHES ?? 15);
const PER_BATCH = Number(process.env.VM_PER_BATCH ?? 20);

const original = readFileSync(defaultWasmPath());
const filteredBytes = Buffer.from(original);
if (!keepFunctionExports(filteredBytes, (name) => QUICKJS_EXPORTS_USED.has(name)))
  throw new Error("nothing filtered");
const modules = {
  "all exports": new WebAssembly.Module(original),
  filtered: new WebAssembly.Module(filteredBytes),
};

const threadCpuNs = () => Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

/** Heap bytes per live instance, and CPU ms per create + eval + dispose, for one batch. */
async function batch(module) {
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const live = [];
  for (let index = 0; index < PER_BATCH; index++) live.push(await QuickJS.create({ wasm: module }));
  const heapPerInstance = (process.memoryUsage().heapUsed - heapBefore) / PER_BATCH;
  for (const vm of live) vm.dispose();
  const cpuBefore = threadCpuNs();
  for (let index = 0; index < PER_BATCH; index++) {
    const vm = await QuickJS.create({ wasm: module });
    vm.evalCode("1 + 1").dispose();
    vm.dispose();
  }
  return { heapPerInstance, cpuMs: (threadCpuNs() - cpuBefore) / 1e6 / PER_BATCH };
}

const results = Object.fromEntries(Object.keys(modules).map((name) => [name, []]));
for (let round = 0; round < BATCHES + 2; round++) {
  for (const [name, module] of Object.entries(modules)) {
    const measured = await batch(module);
    if (round >= 2) results[name].push(measured); // the first two rounds warm both up
  }
}
const rows = Object.entries(results).map(([name, batches]) => ({
  module: name,
  "function exports": WebAssembly.Module.exports(modules[name]).filter((e) => e.kind === "function").length,
  "V8 heap KB per live instance": Number((median(batches.map((b) => b.heapPerInstance)) / 1024).toFixed(1)),
  "CPU ms per create + eval + dispose": Number(median(batches.map((b) => b.cpuMs)).toFixed(3)),
}));
console.log(
  `quickjs.wasm with all its function exports and filtered (medians of ${BATCHES} batches of ${PER_BATCH}; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")})`,
);
console.table(rows);
mkdirSync(join(here, "..", "bench-results"), { recursive: true });
writeFileSync(
  join(here, "..", "bench-results", "vm-exports.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), rows, results }, null, 2)}\n`,
);
