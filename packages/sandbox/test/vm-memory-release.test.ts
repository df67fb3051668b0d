import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCellText, runTrivialCellText } from "./helpers.js";

/**
 * A dropped VM's linear memory is freed only by a full collection of its worker's heap, and the worker
 * lets V8 know it holds such memory (dropVm in vm-pool.js), so a loop of cells does not pile up
 * dead VMs' memory. Before, 100 sequential trivial cells left 50-60 of them alive at once (15-19 MB
 * resident), now about 20 at most.
 *
 * V8 reserves 8-10 GB of address space for each wasm memory (the memory and its guard region); its part
 * beyond the memory's current size is one inaccessible mapping of at least 4 GB, larger than anything
 * else in the process, so a fresh process that runs cells and counts those in /proc/self/maps counts
 * the VMs whose memory is still mapped. It runs the built package in a fresh process: nothing else of the test runner's maps
 * the count, and no other VMs are made in it.
 */

const dist = fileURLToPath(new URL("../dist/", import.meta.url));
const CELLS = 100;
/**
 * A dropped VM's memory grows to 4 MB, so V8's external-memory accounting starts a collection every 10-11
 * dropped VMs; without the growth one comes every 43-45. Counted per cell over 100 cells in 40 fresh
 * processes each: with the growth 6-9 collections and at most 20-26 memories mapped at once, but in 3
 * of 40 processes V8 let a step pass and the most reached 36-50; without it 2 collections and at most
 * 46-50. So the test counts collections (a fall in the count of mapped memories),
 * which one skipped step moves by one or two, not the most mapped at once, which it moves past any bound
 * that still tells the two apart.
 */
const LEAST_COLLECTIONS = 5;
const linuxOnly =
  process.platform === "linux"
    ? null
    : `counts memory mappings in /proc/self/maps (Linux only; this is ${process.platform})`;
if (linuxOnly !== null) console.log(`vm-memory-release.test.ts skipped: ${linuxOnly}`);

function runCells(cellText: string): Promise<{ code: number | null; stdout: string }> {
  const script = `
    import { readFileSync } from "node:fs";
    const sandbox = await import(${JSON.stringify(`${dist}index.js`)});
    function liveMemories() {
      let count = 0;
      for (const line of readFileSync("/proc/self/maps", "utf8").split("\\n")) {
        const range = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
        if (range && parseInt(range[2], 16) - parseInt(range[1], 16) >= 4 * 2 ** 30) count++;
      }
      return count;
    }
    const pool = sandbox.createSandboxPool({ size: 1 });
    let most = 0;
    let collections = 0;
    let previous = 0;
    for (let cell = 0; cell < ${CELLS}; cell++) {
      ${cellText}
      const live = liveMemories();
      if (live < previous) collections++;
      previous = live;
      most = Math.max(most, live);
    }
    await pool.close();
    process.stdout.write(JSON.stringify({ most, collections }));
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.on("error", reject);
    // "close", not "exit": Node emits "exit" before it has read the last of the child's stdout.
    child.on("close", (code) => resolve({ code, stdout }));
  });
}

/** A cell that grows its VM's memory (2.4 MB of array), so its VM cannot be reset and is dropped. */
const GROWING_CELL = runCellText("const a = new Array(300000).fill(7); return a.length;", 300000);
/**
 * A loop of trivial cells resets each cell's VM for the next one (VmImage in vm-image.js): the worker's
 * first VM (from init, made before there is an image), the VM just used and at most one more stay
 * mapped; before, every cell dropped a VM and 20-50 waited for a collection.
 */
const MOST_MAPPED_REUSED = 4;

describe.skipIf(linuxOnly !== null)("the linear memory of dropped VMs", () => {
  it(`is freed as cells go on: at least ${LEAST_COLLECTIONS} collections over ${CELLS} sequential cells whose memory grew`, async () => {
    const result = await runCells(GROWING_CELL);
    expect(result.code).toBe(0);
    const { most, collections } = JSON.parse(result.stdout) as { most: number; collections: number };
    // At least the VM of the cell just run and the spare built for the next one.
    expect(most).toBeGreaterThanOrEqual(1);
    expect(
      collections,
      `${collections} collections; at most ${most} memories mapped at once`,
    ).toBeGreaterThanOrEqual(LEAST_COLLECTIONS);
  }, 60_000);

  it(`is not made at all in a loop of trivial cells: at most ${MOST_MAPPED_REUSED} memories mapped over ${CELLS} cells`, async () => {
    const result = await runCells(runTrivialCellText);
    expect(result.code).toBe(0);
    const { most, collections } = JSON.parse(result.stdout) as { most: number; collections: number };
    expect(most, `${collections} collections; at most ${most} memories mapped at once`).toBeLessThanOrEqual(
      MOST_MAPPED_REUSED,
    );
  }, 60_000);
});
