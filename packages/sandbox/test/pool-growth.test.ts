import { describe, expect, it } from "vitest";
import { createSandboxPool, type SandboxPool } from "../src/index.js";
import { emptySurface, limits } from "./helpers.js";

/**
 * The pool starts one worker and grows toward `size` only when a run has to wait: a process that runs
 * one cell at a time keeps one worker thread (and one set of VMs), while concurrent cells still get
 * `size` workers. Counts and orders are asserted, never durations.
 */

function start(pool: SandboxPool, owner: string, code: string, timeoutMs = 30_000, signal?: AbortSignal) {
  return pool
    .run({
      owner,
      code,
      language: "javascript",
      surface: emptySurface,
      limits,
      timeoutMs,
      onRequest: () => {},
      ...(signal ? { signal } : {}),
    })
    .next();
}

describe("the pool's start-up and growth", () => {
  it("keeps one worker while cells run one at a time", async () => {
    const pool = createSandboxPool({ size: 2, maxWorkers: 4 });
    try {
      expect(pool.stats().workers).toBe(1);
      for (let index = 0; index < 20; index++) {
        expect(await start(pool, "solo", `return ${index}`)).toMatchObject({
          type: "completed",
          value: index,
        });
      }
      // Time for a worker that would boot once the first is idle (the earlier policy) to appear.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(pool.stats().workers).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it("grows to size, and no further, when cells overlap", async () => {
    const pool = createSandboxPool({ size: 2, maxWorkers: 4 });
    try {
      for (let round = 0; round < 20 && pool.stats().workers < 2; round++) {
        const values = await Promise.all(
          [0, 1, 2, 3].map((index) => start(pool, `s${index}`, `return ${index}`)),
        );
        expect(values.map((event) => event.type)).toEqual([
          "completed",
          "completed",
          "completed",
          "completed",
        ]);
      }
      expect(pool.stats().workers).toBe(2);
      for (let round = 0; round < 5; round++) {
        await Promise.all([0, 1, 2, 3].map((index) => start(pool, `s${index}`, `return ${index}`)));
      }
      // Quick cells queue on the size workers; only cells holding every worker start extra ones.
      expect(pool.stats().workers).toBe(2);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("does not queue another owner's cell behind a spinning cell while the pool grows", async () => {
    // A fresh pool: one worker. The polite cell arrives while the spinner has only just started there,
    // so the worker is busy "briefly": the pool grows, and the polite cell takes the new worker instead
    // of waiting for the spinner's deadline.
    const pool = createSandboxPool({ size: 2, maxWorkers: 4 });
    const stop = new AbortController();
    try {
      expect(await start(pool, "warm", "return 0")).toMatchObject({ type: "completed" });
      let spinnerEnded = false;
      const spinner = start(pool, "hostile", "while (true) {}", 60_000, stop.signal).then((event) => {
        spinnerEnded = true;
        return event;
      });
      expect(await start(pool, "polite", "return 'answered'")).toMatchObject({
        type: "completed",
        value: "answered",
      });
      expect(spinnerEnded).toBe(false);
      expect(pool.stats().workers).toBe(2);
      stop.abort();
      expect(await spinner).toMatchObject({ type: "failed", code: "aborted" });
    } finally {
      stop.abort();
      await pool.close();
    }
  }, 90_000);
});
