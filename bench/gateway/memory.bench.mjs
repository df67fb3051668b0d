// Where the peak RSS of 100 sequential `return 1 + 1` cells goes (the memory target), floor
// against the embedded engine, each in fresh processes (performance-child.mjs rss), alternated:
//   default           as `pnpm bench` measures it;
//   liftoff-only      `--liftoff-only`: V8 never compiles QuickJS's wasm with TurboFan, so what is left
//                     is the structural part (threads, V8 heaps, modules, VMs);
//   one-compile-task  `--wasm-num-compilation-tasks=1`: V8's TurboFan compiles of the wasm run one at a
//                     time, so their transient memory does not overlap.
// The V8 flags are for this measurement only; neither the sandbox nor the gateway sets them.
// Then, with default flags, the same cells counting the wasm memories still mapped after every tenth
// (performance-child.mjs vms): VMs dropped but not yet collected, a figure load does not distort.
// Prints medians and ratios, writes bench-results/memory.json. Run after a build.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { median, runPerformanceChild } from "./measure.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const benchDir = join(here, "..");
const STARTS = Number(process.env.BENCH_STARTS ?? 5);
const MODES = {
  default: [],
  "liftoff-only": ["--liftoff-only"],
  "one-compile-task": ["--wasm-num-compilation-tasks=1"],
};
const SUBJECTS = ["floor", "engine"];

const samples = Object.fromEntries(
  Object.keys(MODES).map((mode) => [mode, Object.fromEntries(SUBJECTS.map((s) => [s, []]))]),
);
for (let round = 0; round < STARTS; round++) {
  for (const [mode, flags] of Object.entries(MODES)) {
    // Alternate which subject goes first, so neither always runs on a machine the other just warmed.
    for (const subject of round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse())
      samples[mode][subject].push(await runPerformanceChild(["rss", subject], flags));
  }
}

const mb = (value) => Number(value.toFixed(1));
const rows = {};
for (const mode of Object.keys(MODES)) {
  const floor = median(samples[mode].floor.map((s) => s.peakRssMb));
  const engine = median(samples[mode].engine.map((s) => s.peakRssMb));
  rows[mode] = {
    "floor MB": mb(floor),
    "engine MB": mb(engine),
    "engine - floor": mb(engine - floor),
    "engine ÷ floor": `${(engine / floor).toFixed(2)}×`,
  };
}
console.log(`Peak RSS of 100 sequential C1 cells, medians of ${STARTS} fresh processes each`);
console.table(rows);
// RSS after chosen runs, medians: the wasm tier-up shows as a rise and a drop around the peak.
const curveRows = {};
for (const subject of SUBJECTS) {
  const runs = Object.keys(samples.default[subject][0].rssMbAfterRun);
  curveRows[subject] = Object.fromEntries(
    runs.map((run) => [
      `after ${run}`,
      mb(median(samples.default[subject].map((s) => s.rssMbAfterRun[run]))),
    ]),
  );
}
console.log("RSS (MB) after run n, default flags");
console.table(curveRows);
// Dropped VMs whose memory is still mapped: each holds about 0.3 MB resident until a full collection.
const mapped = Object.fromEntries(SUBJECTS.map((s) => [s, []]));
for (let round = 0; round < STARTS; round++) {
  for (const subject of round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse())
    mapped[subject].push(await runPerformanceChild(["vms", subject]));
}
const mappedRows = {};
for (const subject of SUBJECTS) {
  const runs = Object.keys(mapped[subject][0].mappedAfterRun);
  if (mapped[subject][0].mappedAfterRun[runs[0]] === null) continue;
  mappedRows[subject] = Object.fromEntries(
    runs.map((run) => [`after ${run}`, median(mapped[subject].map((s) => s.mappedAfterRun[run]))]),
  );
  mappedRows[subject].most = median(mapped[subject].map((s) => Math.max(...Object.values(s.mappedAfterRun))));
}
if (Object.keys(mappedRows).length > 0) {
  console.log("Wasm memories still mapped after run n (VMs live or dropped and not yet collected), medians");
  console.table(mappedRows);
}
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "memory.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), starts: STARTS, rows, curve: curveRows, mapped: mappedRows, samples, mappedSamples: mapped }, null, 2)}\n`,
);
