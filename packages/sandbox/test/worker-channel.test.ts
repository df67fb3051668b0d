import { Worker } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { emptySurface, limits, runToEnd } from "./helpers.js";

// One worker, so every run below shares the thread that waits synchronously for host results
// (the doorbell): whatever the host sends must still reach it, in order, while it waits.
const pool = createSandboxPool({ size: 1, maxWorkers: 1 });
afterAll(() => pool.close());

function idleRun(code: string, signal?: AbortSignal) {
  return pool.run({
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    deadlineAt: Date.now() + 30_000,
    onRequest: () => {},
    ...(signal ? { signal } : {}),
  });
}

describe("the worker channel", () => {
  it("runs a loop of sequential calls with every result delivered to the right await", async () => {
    const { event, events } = await runToEnd(
      pool,
      "let s = ''; for (let i = 0; i < 300; i++) s += await tools.call('t', { i }); return s;",
      {
        answer: (request) => ({
          ok: true,
          value: String((request as unknown as { input: { i: number } }).input.i % 10),
        }),
      },
    );
    expect(event).toEqual({ type: "completed", value: "0123456789".repeat(30), output: [] });
    // One idle event per call: each result went in on its own and the guest asked for the next.
    expect(events.filter((item) => item.type === "idle")).toHaveLength(300);
  });

  it("starts and finishes another run on the same worker while one waits on a host call", async () => {
    const waiting = idleRun("return await tools.call('slow', {});");
    const first = await waiting.next();
    expect(first.type).toBe("idle");
    const { event } = await runToEnd(pool, "return 40 + 2");
    expect(event).toEqual({ type: "completed", value: 42, output: [] });
    const pending = first.type === "idle" ? first.pending[0]?.requestId : undefined;
    waiting.settle(pending as string, { ok: true, value: "late" });
    expect(await waiting.next()).toEqual({ type: "completed", value: "late", output: [] });
    expect(pool.stats().workersReplaced).toBe(0);
  });

  it("frees a waiting run on dispose and on abort without replacing the worker", async () => {
    const disposed = idleRun("return await tools.call('never', {});");
    expect((await disposed.next()).type).toBe("idle");
    disposed.dispose();
    expect(await disposed.next()).toMatchObject({ type: "failed", code: "aborted" });

    const controller = new AbortController();
    const aborted = idleRun("return await tools.call('never', {});", controller.signal);
    expect((await aborted.next()).type).toBe("idle");
    controller.abort();
    expect(await aborted.next()).toMatchObject({ type: "failed", code: "aborted" });

    const { event } = await runToEnd(pool, "return 'still here'");
    expect(event).toMatchObject({ type: "completed", value: "still here" });
    expect(pool.stats()).toMatchObject({ liveRuns: 0, workersReplaced: 0 });
  });

  it("suspends a run whose worker is waiting for its results", async () => {
    const run = idleRun("const a = await tools.call('a', {}); return a + 1;");
    expect((await run.next()).type).toBe("idle");
    const suspended = await run.suspend();
    expect(suspended.pending).toHaveLength(1);
    const restored = pool.restore({
      snapshot: suspended.snapshot,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest: () => {},
    });
    const idle = await restored.next();
    expect(idle.type).toBe("idle");
    restored.settle(suspended.pending[0]?.requestId as string, { ok: true, value: 41 });
    expect(await restored.next()).toEqual({ type: "completed", value: 42, output: [] });
  });

  it("fails loudly on a host message it cannot read, so the pool replaces the worker", async () => {
    // Messages are handled synchronously now (no promise per message): a malformed one must still
    // surface as the worker's error rather than be swallowed.
    const worker = new Worker(new URL("../src/worker/sandbox-worker.js", import.meta.url), { execArgv: [] });
    try {
      const failed = new Promise<Error>((resolve) => worker.once("error", resolve));
      worker.postMessage({ type: "settle", runId: "r", items: "not a list", deadlineAt: 0 });
      const error = await failed;
      expect(error.name).toBe("ProtocolError");
      expect(error.message).toContain('"settle"');
    } finally {
      await worker.terminate();
    }
  });

  it("frees what the host function hands the guest: 24,000 settled calls fit in a 1 MB VM", async () => {
    // quickjs-wasi keeps its own reference to a host callback's return value; a request id never
    // freed by the worker stayed in the VM's heap, and about 20,000 calls ran a 1 MB VM out of memory.
    const rounds = 48;
    const run = pool.run({
      code: `let n = 0;
        for (let r = 0; r < ${rounds}; r++) {
          const all = await Promise.all(Array.from({ length: 500 }, () => tools.search("x")));
          n += all.length;
        }
        return n;`,
      language: "javascript",
      surface: emptySurface,
      limits: { ...limits, memoryLimitBytes: 1024 * 1024 },
      deadlineAt: Date.now() + 120_000,
      onRequest: (request) => queueMicrotask(() => run.settle(request.requestId, { ok: true, value: 1 })),
    });
    let idles = 0;
    for (;;) {
      const event = await run.next();
      if (event.type === "idle") {
        idles += 1;
        continue;
      }
      expect(event).toEqual({ type: "completed", value: rounds * 500, output: [] });
      break;
    }
    expect(idles).toBeGreaterThanOrEqual(rounds);
  });

  // Requests a short drain issues travel inside the idle that ends it; a drain running past 1 ms (a
  // start's, or any under load) sends them at once in their own messages. Either way the caller sees
  // the same order. (test/run-handle.test.ts feeds the host side an idle with requests directly.)
  it("hands the requests of one drain to onRequest in order, before the idle event that lists them", async () => {
    const seen: string[] = [];
    const run = pool.run({
      code: "await tools.call('first', {}); const [a, b, c] = await Promise.all([tools.call('a', {}), tools.call('b', {}), tools.call('c', {})]); return a + b + c;",
      language: "javascript",
      surface: emptySurface,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest: (request) => seen.push(`${request.requestId}:${(request as { target: string }).target}`),
    });
    expect((await run.next()).type).toBe("idle");
    run.settle("r1", { ok: true, value: null });
    const idle = await run.next();
    expect(seen).toEqual(["r1:first", "r2:a", "r3:b", "r4:c"]);
    expect(idle.type === "idle" ? idle.pending.map((request) => request.requestId) : idle).toEqual([
      "r2",
      "r3",
      "r4",
    ]);
    run.settle("r4", { ok: true, value: "z" });
    run.settle("r2", { ok: true, value: "x" });
    run.settle("r3", { ok: true, value: "y" });
    expect(await run.next()).toEqual({ type: "completed", value: "xyz", output: [] });
  });

  it("hands over no more of a drain's requests once the caller disposes the run in onRequest", async () => {
    const seen: string[] = [];
    const run = pool.run({
      code: "await tools.call('first', {}); await Promise.all([tools.call('a', {}), tools.call('b', {}), tools.call('c', {})]); return 1;",
      language: "javascript",
      surface: emptySurface,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest: (request) => {
        seen.push(request.requestId);
        if (request.requestId === "r2") run.dispose();
      },
    });
    expect((await run.next()).type).toBe("idle");
    run.settle("r1", { ok: true, value: null });
    expect(await run.next()).toMatchObject({ type: "failed", code: "aborted" });
    expect(seen).toEqual(["r1", "r2"]);
    const { event } = await runToEnd(pool, "return 'next'");
    expect(event).toMatchObject({ type: "completed", value: "next" });
    expect(pool.stats()).toMatchObject({ liveRuns: 0, workersReplaced: 0 });
  });
});
