import { describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { emptySurface, limits, runToEnd } from "./helpers.js";

// Spec, "Configuration": timeoutMs is the wall-clock limit of one exec or wait. The cell's own time is
// meant: a worker that is still starting (spawn, WASM instantiation) is the runtime's cost, not the cell's.
describe("the cell's own clock", () => {
  it("does not count a worker's cold start against timeoutMs", async () => {
    // A fresh pool: its only worker starts with this run, which still gets its full 100 ms.
    const cold = createSandboxPool({ size: 1 });
    try {
      const launchedAt = Date.now();
      const { event, run } = await runToEnd(cold, "return 1", { deadlineAt: undefined, timeoutMs: 100 });
      expect(event).toMatchObject({ type: "completed", value: 1 });
      // The deadline was set when the worker took the run, not when the run was asked for.
      expect(run.deadline).toBeGreaterThanOrEqual(launchedAt + 100);
      expect(Number.isFinite(run.deadline)).toBe(true);
    } finally {
      await cold.close();
    }
  });

  it("still stops a spinning cell at its own timeoutMs", async () => {
    const pool = createSandboxPool({ size: 1 });
    try {
      const { event } = await runToEnd(pool, "while (true) {}", { deadlineAt: undefined, timeoutMs: 200 });
      expect(event).toMatchObject({ type: "failed", code: "timeout" });
    } finally {
      await pool.close();
    }
  });

  it("fails runtime_unavailable when no worker takes the run within the start-up bound", async () => {
    // A 1 ms start-up bound cannot cover spawning a worker: the separate bound, not the cell's timeout.
    const cold = createSandboxPool({ size: 1, startupTimeoutMs: 1 });
    try {
      const { event } = await runToEnd(cold, "return 1", { deadlineAt: undefined, timeoutMs: 60_000 });
      expect(event).toMatchObject({ type: "failed", code: "runtime_unavailable" });
      expect((event as { message: string }).message).toMatch(
        /No sandbox worker could take the cell within 1 ms/,
      );
    } finally {
      await cold.close();
    }
  });

  it("refuses a run with neither deadlineAt nor timeoutMs", () => {
    const pool = createSandboxPool({ size: 1 });
    try {
      expect(() =>
        pool.run({
          code: "return 1",
          language: "javascript",
          surface: emptySurface,
          limits,
          onRequest: () => {},
        }),
      ).toThrow(/deadlineAt or timeoutMs/);
    } finally {
      void pool.close();
    }
  });
});
