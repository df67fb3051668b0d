// Spawned by performance.bench.mjs in a fresh process, one measurement each, printed as one JSON line:
//   cold <floor|engine>  milliseconds from before the first import to the first result of `return 1 + 1`
//   rss <floor|engine>   peak RSS (maxRSS) after 100 sequential `return 1 + 1` cells, and the RSS after
//                        some of them (where the peak falls: bench/memory.bench.mjs)
//   vms <floor|engine>   the same 100 cells, counting after every tenth the wasm memories still mapped
//                        (VMs dropped but not yet collected, bench/memory.bench.mjs); reading the maps
//                        allocates, so the peak RSS of this mode is not the one `rss` reports
import { readFileSync } from "node:fs";
import { prepareBenchRun } from "./bench-tools.mjs";

const [mode, subject] = process.argv.slice(2);
const C1 = "return 1 + 1";
const started = performance.now();

async function floorSubject() {
  const { floorRun, loadFloor } = await import("./floor.mjs");
  const floor = await loadFloor();
  const imported = performance.now();
  return { imported, run: () => floorRun(floor, C1, false), close: async () => {} };
}

async function engineSubject() {
  const { createCodeModeEngine } = await import("@codecell/engine");
  const imported = performance.now();
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
  const run = prepareBenchRun(engine);
  let callId = 0;
  return {
    imported,
    run: async () => {
      const result = await run.exec({ code: C1 }, { toolCallId: `c${++callId}` });
      if (result.status !== "completed") throw new Error(JSON.stringify(result));
      return result.value;
    },
    close: () => engine.close(),
  };
}

/** Resident set now (VmRSS), read between cells: cheap, and allocates next to nothing. */
function currentRssMb() {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]) / 1024;
}

/**
 * Wasm memories mapped in this process: V8 reserves 8-10 GB of address space for each (the memory and
 * its guard region; the part beyond its current size is one mapping of at least 4 GB, larger than
 * anything else here) and releases it when it frees the memory, so this counts the VMs, live or
 * dropped, whose linear memory is still there. Linux only (null elsewhere).
 */
function mappedWasmMemories() {
  let maps;
  try {
    maps = readFileSync("/proc/self/maps", "utf8");
  } catch {
    return null;
  }
  let count = 0;
  for (const line of maps.split("\n")) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (range && Number.parseInt(range[2], 16) - Number.parseInt(range[1], 16) >= 4 * 2 ** 30) count++;
  }
  return count;
}

const target = subject === "floor" ? await floorSubject() : await engineSubject();
if (mode === "cold") {
  const value = await target.run();
  const done = performance.now();
  if (value !== 2) throw new Error(`unexpected ${value}`);
  process.stdout.write(
    `${JSON.stringify({ importMs: target.imported - started, firstMs: done - target.imported, totalMs: done - started })}\n`,
  );
} else if (mode === "rss") {
  const rssMbAfterRun = {};
  for (let run = 1; run <= 100; run++) {
    await target.run();
    if (run === 1 || run % 20 === 0) rssMbAfterRun[run] = currentRssMb();
  }
  process.stdout.write(
    `${JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024, rssMbAfterRun })}\n`,
  );
} else if (mode === "vms") {
  const mappedAfterRun = {};
  for (let run = 1; run <= 100; run++) {
    await target.run();
    if (run === 1 || run % 10 === 0) mappedAfterRun[run] = mappedWasmMemories();
  }
  process.stdout.write(`${JSON.stringify({ mappedAfterRun })}\n`);
} else {
  throw new Error(`unknown mode ${mode}`);
}
await target.close();
