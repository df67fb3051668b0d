// CPU time of the checker's own work, in a process of its own where nothing else runs, so the figure
// does not depend on how loaded the machine is (wall time on a shared 2-core machine does). Prints one
// JSON line: the first check (compiler load, library, declarations, the check) and warm checks.
import { performance } from "node:perf_hooks";
import { createCheckerCore } from "../../packages/typecheck/src/worker/checker-core.js";
import { realGuest, syntheticGuest, thirtyLineCell } from "./guests.mjs";

const cpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const declarations = process.argv[2] === "synthetic" ? syntheticGuest(1000) : realGuest();
const checks = Number(process.argv[3] ?? 60);

let cpuAt = cpu();
let wallAt = performance.now();
const core = createCheckerCore();
const first = await core.check({ key: "k", declarations, code: thirtyLineCell(-1), language: "javascript" });
if (first.status !== "checked" || first.total !== 0) throw new Error(JSON.stringify(first));
const firstCpu = cpu() - cpuAt;
const firstWall = performance.now() - wallAt;
const cpuTimes = [];
const wallTimes = [];
for (let index = 0; index < checks; index++) {
  cpuAt = cpu();
  wallAt = performance.now();
  await core.check({
    key: "k",
    code: thirtyLineCell(index),
    language: index % 4 === 3 ? "typescript" : "javascript",
  });
  cpuTimes.push(cpu() - cpuAt);
  wallTimes.push(performance.now() - wallAt);
}
console.log(
  JSON.stringify({
    firstCpuMs: firstCpu,
    firstWallMs: firstWall,
    warmCpuP50Ms: percentile(cpuTimes, 50),
    warmCpuP99Ms: percentile(cpuTimes, 99),
    warmWallP50Ms: percentile(wallTimes, 50),
    warmWallP99Ms: percentile(wallTimes, 99),
  }),
);
