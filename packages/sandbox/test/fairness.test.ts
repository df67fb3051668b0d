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

function start(owner: string, code: string, deadlineMs: number, signal?: AbortSignal, on = pool) {
  const run = on.run({
    owner,
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    // The engine's way: the cell's own clock starts when its worker begins it.
    timeoutMs: deadlineMs,
    onRequest: () => {},
    ...(signal ? { signal } : {}),
  });
  return run.next();
}

async function untilLive(on: typeof pool, count: number) {
  for (let wait = 0; wait < 200 && on.stats().liveRuns < count; wait++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  // Running long enough to count as holding their workers.
  await new Promise((resolve) => setTimeout(resolve, 300));
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
    await untilLive(pool, 3);
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

  it("keeps one owner to half of maxWorkers: its further cells wait behind its own", async () => {
    const capped = createSandboxPool({ size: 2, maxWorkers: 4 });
    try {
      await Promise.all([
        start("warm", "return 1", 30_000, undefined, capped),
        start("warm", "return 1", 30_000, undefined, capped),
      ]);
      const stopSpinning = new AbortController();
      const stopQueued = new AbortController();
      const ended: string[] = [];
      // As many spinning cells as the pool may ever have workers: without the cap they would take all.
      const spinners = ["spinning", "spinning", "queued", "queued"].map((role) =>
        start(
          "hostile",
          "while (true) {}",
          40_000,
          role === "spinning" ? stopSpinning.signal : stopQueued.signal,
          capped,
        ).then((event) => {
          ended.push(role);
          return event;
        }),
      );
      await untilLive(capped, 4);
      expect(await start("polite", "return 'answered'", 30_000, undefined, capped)).toMatchObject({
        type: "completed",
        value: "answered",
      });
      expect(ended).toEqual([]);
      // Two workers hold the hostile cells; the pool grew for the polite one and stayed under its cap.
      expect(capped.stats().workers).toBeGreaterThan(2);
      expect(capped.stats().workers).toBeLessThanOrEqual(4);
      // Aborting the cells queued behind the spinning ones ends them at once and does not stop the
      // workers they wait on (which would fail the spinning cells with a misleading internal_error).
      stopQueued.abort();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(ended).toEqual(["queued", "queued"]);
      expect(capped.stats().workersReplaced).toBe(0);
      stopSpinning.abort();
      const events = await Promise.all(spinners);
      for (const event of events) expect(event).toMatchObject({ type: "failed", code: "aborted" });
    } finally {
      await capped.close();
    }
  }, 90_000);
});
