import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type SandboxEvent } from "../src/index.js";
import { emptySurface, limits } from "./helpers.js";

/**
 * Starvation: spinning cells hold their worker's thread until their deadline. Another session's quick
 * cell must not wait for them, and one session must never hold every worker. Deadlines are long on
 * purpose: a quick cell that waited for the spinners would fail; one placed well is answered at once
 * (after, at worst, one extra worker's start on a busy machine).
 */

const pool = createSandboxPool({ size: 2, maxWorkers: 4 });
afterAll(() => pool.close());

function start(owner: string, code: string, deadlineMs: number, signal?: AbortSignal) {
  const run = pool.run({
    owner,
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    deadlineAt: Date.now() + deadlineMs,
    onRequest: () => {},
    ...(signal ? { signal } : {}),
  });
  return run.next();
}

describe("fairness between sessions", () => {
  it("answers another session while one session's cells spin on every base worker", async () => {
    // A warm pool, as a serving gateway has: both base workers started.
    await Promise.all([start("warm", "return 1", 30_000), start("warm", "return 1", 30_000)]);
    const stop = new AbortController();
    const spinnersEnded: boolean[] = [];
    const spinners = [0, 1, 2].map((index) =>
      start("hostile", "while (true) {}", 40_000, stop.signal).then((event) => {
        spinnersEnded[index] = true;
        return event;
      }),
    );
    // Let the spinners take their workers and run long enough to count as holding them.
    for (let wait = 0; wait < 100 && pool.stats().liveRuns < 3; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const quick: SandboxEvent[] = [];
    for (let index = 0; index < 5; index++) quick.push(await start("polite", `return ${index}`, 30_000));
    const endedBeforeQuickCellsFinished = spinnersEnded.filter(Boolean).length;
    expect(quick.map((event) => (event.type === "completed" ? event.value : event))).toEqual([0, 1, 2, 3, 4]);
    // The polite session got its answers while the hostile cells were still spinning.
    expect(endedBeforeQuickCellsFinished).toBe(0);
    expect(pool.stats().workers).toBeLessThanOrEqual(4);
    stop.abort();
    for (const event of await Promise.all(spinners))
      expect(event).toMatchObject({ type: "failed", code: "aborted" });
  }, 60_000);
});
