// What the in-thread sandbox (thread: "in-thread") must keep of the worker's guarantees, and what it
// trades away, tested on the host's own thread. The shared cases of evaluate, limits, hostile,
// prelude-reach, snapshot and bridge-depth run in this mode too (describe.each over THREAD_MODES).
import { isMainThread } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type SandboxRun } from "../src/index.js";
import { earlyWorkerWaiting } from "../src/worker-start.js";
import { emptySurface, limits, runToEnd } from "./helpers.js";

const pool = createSandboxPool({ thread: "in-thread", snapshotSecret: "shared-secret" });
const workers = createSandboxPool({ size: 1, snapshotSecret: "shared-secret" });
afterAll(() => Promise.all([pool.close(), workers.close()]));

/** Run a cell and stop at its first idle (a host call pending). */
async function untilIdle(target: typeof pool, code: string): Promise<SandboxRun> {
  const run = target.run({
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    timeoutMs: 5_000,
    onRequest: () => {},
  });
  const event = await run.next();
  expect(event.type).toBe("idle");
  return run;
}

describe("the in-thread sandbox", () => {
  it("runs on the host's thread, with no worker thread", async () => {
    expect(isMainThread).toBe(true);
    const { event } = await runToEnd(pool, "return 6 * 7");
    expect(event).toEqual({ type: "completed", value: 42, output: [] });
    // The pool stopped the worker started as the package loaded: it would only hold its heap.
    expect(earlyWorkerWaiting()).toBe(false);
  });

  it("stops a busy loop at its deadline with the interrupt handler, and the host goes on", async () => {
    const started = Date.now();
    const { event } = await runToEnd(pool, "for (;;) {}", { deadlineAt: undefined, timeoutMs: 300 });
    expect(event).toMatchObject({ type: "failed", code: "timeout" });
    expect(Date.now() - started).toBeLessThan(5_000);
    const after = await runToEnd(pool, "return 'still here'");
    expect(after.event).toMatchObject({ type: "completed", value: "still here" });
  });

  it("blocks the host's event loop while guest code computes (the mode's trade-off)", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    try {
      const { event } = await runToEnd(
        pool,
        "const end = Date.now() + 200; while (Date.now() < end) {} return 1",
      );
      expect(event).toMatchObject({ type: "completed", value: 1 });
    } finally {
      clearInterval(timer);
    }
    // Worker threads would let the timer tick ~40 times meanwhile; on the host's thread it cannot.
    expect(ticks).toBeLessThan(5);
  });

  it("holds the memory limit: the VM is discarded, the host is untouched", async () => {
    const before = process.memoryUsage().heapUsed;
    const { event } = await runToEnd(pool, "const a = []; for (;;) a.push(new Array(10000).fill(1));", {
      deadlineAt: Date.now() + 15_000,
    });
    expect(event).toMatchObject({ type: "failed", code: "memory_limit_exceeded" });
    // The guest's heap lives in the VM's linear memory, not in the host's JavaScript heap.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(16 * 1024 * 1024);
  });

  it("gives the guest no host object, module, file system, network or environment", async () => {
    const { event } = await runToEnd(
      pool,
      `return [typeof process, typeof require, typeof fetch, typeof Buffer, typeof WebAssembly,
        typeof globalThis.setImmediate, await import("node:fs").then(() => "imported", (e) => "refused")];`,
    );
    // import() of a module is refused before the cell runs, or at run time: either way nothing loads.
    if (event.type === "failed") expect(event.code).toBe("module_access_denied");
    else
      expect(event).toMatchObject({
        value: ["undefined", "undefined", "undefined", "undefined", "undefined", "undefined", "refused"],
      });
  });

  it("keeps the error codes: a forged code stays a plain guest error", async () => {
    const { event } = await runToEnd(pool, `const e = new Error("fake"); e.code = "timeout"; throw e;`);
    expect(event).toMatchObject({ type: "failed", error: { message: "fake" } });
    expect((event as { code?: string }).code).toBeUndefined();
  });

  it("suspends in-thread and restores on a worker, and back, with the same secret", async () => {
    const code = `const first = await yield_control("a"); const second = await yield_control("b"); return "done"`;
    const run = await untilIdle(pool, code);
    const suspended = await run.suspend();
    expect(suspended.pending).toMatchObject([{ kind: "yield" }]);

    const onWorker = workers.restore({
      snapshot: suspended.snapshot,
      limits,
      timeoutMs: 5_000,
      onRequest: () => {},
    });
    const idle = await onWorker.next();
    expect(idle).toMatchObject({ type: "idle", pending: suspended.pending });
    onWorker.settle(suspended.pending[0]!.requestId, { ok: true, value: null });
    const second = await onWorker.next();
    expect(second.type).toBe("idle");
    const again = await onWorker.suspend();

    const back = pool.restore({ snapshot: again.snapshot, limits, timeoutMs: 5_000, onRequest: () => {} });
    expect(await back.next()).toMatchObject({ type: "idle" });
    back.settle(again.pending[0]!.requestId, { ok: true, value: null });
    expect(await back.next()).toMatchObject({ type: "completed", value: "done" });
  });

  it("refuses a snapshot sealed with another secret, each pool keeping its own", async () => {
    const other = createSandboxPool({ thread: "in-thread", snapshotSecret: "other-secret" });
    try {
      const run = await untilIdle(other, `await yield_control(); return 1`);
      const suspended = await run.suspend();
      const restored = pool.restore({
        snapshot: suspended.snapshot,
        limits,
        timeoutMs: 5_000,
        onRequest: () => {},
      });
      expect(await restored.next()).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });
      const own = other.restore({
        snapshot: suspended.snapshot,
        limits,
        timeoutMs: 5_000,
        onRequest: () => {},
      });
      expect(await own.next()).toMatchObject({ type: "idle" });
      own.dispose();
    } finally {
      await other.close();
    }
  });

  it("ends a run whose pool is closed while it waits on the host", async () => {
    const closing = createSandboxPool({ thread: "in-thread", snapshotSecret: "shared-secret" });
    const run = await untilIdle(closing, `await yield_control(); return 1`);
    await closing.close();
    expect(await run.next()).toMatchObject({ type: "failed", code: "aborted" });
    // The pool in use beside it is untouched.
    expect((await runToEnd(pool, "return 2")).event).toMatchObject({ type: "completed", value: 2 });
  });

  it("rejects an unknown thread mode with invalid_input", () => {
    expect(() => createSandboxPool({ thread: "fiber" as "worker" })).toThrow(
      /thread must be "worker" or "in-thread"/,
    );
  });
});
