import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { limits, runToEnd, surface } from "./helpers.js";

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  afterAll(() => pool.close());

  const soon = () => Date.now() + 300;

  describe("deadline", () => {
    const spins = [
      { name: "a plain infinite loop", code: "while (true) {}" },
      { name: "a loop inside a promise job", code: "await null; while (true) {}" },
      // Each job is short; only the endless queue of them never lets the worker's drain end.
      { name: "an endless loop of awaits", code: "for (;;) await null;" },
      {
        // Each job queues the next and keeps nothing: memory stays flat, so only the deadline ends it.
        name: "an endless chain of promise jobs",
        code: "const spin = () => { Promise.resolve().then(spin); }; spin(); await new Promise(() => {});",
      },
      {
        name: "a loop in a getter hit while serializing the result",
        code: "return { get x() { for (;;) {} } }",
      },
      { name: "a catastrophic regex", code: "return /^(a+)+$/.test('a'.repeat(40) + 'b')" },
      {
        name: "a comparator sort",
        code: "const a = []; for (let i = 0; i < 1e5; i++) a.push(i); a.sort(() => { for (;;) {} });",
      },
    ];
    it.each(spins)("stops $name with timeout", async ({ code }) => {
      const { event } = await runToEnd(pool, code, { deadlineAt: soon() });
      expect(event).toMatchObject({ type: "failed", code: "timeout" });
      expect(await runToEnd(pool, "return 'healthy'")).toMatchObject({
        event: { type: "completed", value: "healthy" },
      });
    });

    it("ends an endless chain of promise jobs that holds every promise it made, and stays healthy", async () => {
      // Each promise here is resolved with the next, so the whole chain stays reachable and grows. Which
      // limit ends it depends on where QuickJS runs out of memory: in the sandbox's accounting
      // (memory_limit_exceeded), inside a job (the engine drops that job's error, the chain breaks and
      // the cell is left awaiting a promise nothing can settle), or not before the deadline.
      const code = "const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {});";
      for (const memoryLimitBytes of [8, 16, 32].map((megabytes) => megabytes * 1024 * 1024)) {
        const { event } = await runToEnd(pool, code, {
          deadlineAt: soon(),
          limits: { ...limits, memoryLimitBytes },
        });
        expect(event.type).toBe("failed");
        if (event.type !== "failed") continue;
        if (event.code === undefined) expect(event.message).toMatch(/nothing can settle/);
        else expect(["timeout", "memory_limit_exceeded"]).toContain(event.code);
        expect(await runToEnd(pool, "return 'healthy'")).toMatchObject({
          event: { type: "completed", value: "healthy" },
        });
      }
    });

    it("keeps the host event loop responsive while a guest spins", async () => {
      let ticks = 0;
      const timer = setInterval(() => ticks++, 2);
      const { event } = await runToEnd(pool, "while (true) {}", { deadlineAt: Date.now() + 600 });
      clearInterval(timer);
      expect(event).toMatchObject({ type: "failed", code: "timeout" });
      // The host's timer kept running through the 600 ms spin, which happens on a worker thread; a spin
      // on the host's own thread would hold its loop until the deadline, leaving it a tick at most.
      expect(ticks).toBeGreaterThanOrEqual(5);
    });

    it("terminates and replaces a worker stuck in a built-in the interrupt cannot reach", async () => {
      const lonely = createSandboxPool({ size: 1, watchdogGraceMs: 50 });
      try {
        const before = lonely.stats().workersReplaced;
        const bystander = lonely.run({
          code: "return await tools.call('slow', {})",
          language: "javascript",
          surface,
          limits,
          deadlineAt: Date.now() + 10_000,
          onRequest: () => {},
        });
        expect(await bystander.next()).toMatchObject({ type: "idle" });
        // A default (string) sort of 3e6 numbers runs in C for seconds without reaching the interrupt
        // handler. The array is built first (interruptible, and slow on a busy machine); the short
        // deadline starts only when the cell resumes into the sort.
        const code =
          "const a = new Array(3e6); for (let i = 0; i < a.length; i++) a[i] = (i * 7919) % 3e6; await tools.call('go', {}); a.sort(); return 1";
        const requests: string[] = [];
        const run = lonely.run({
          code,
          language: "javascript",
          surface,
          limits: { ...limits, memoryLimitBytes: 512 * 1024 * 1024 },
          deadlineAt: Date.now() + 15_000,
          onRequest: (request) => requests.push(request.requestId),
        });
        expect(await run.next()).toMatchObject({ type: "idle" });
        run.setDeadline(Date.now() + 200);
        run.settle(requests[0] as string, { ok: true, value: null });
        const event = await run.next();
        expect(event).toMatchObject({ type: "failed", code: "timeout" });
        // What the watchdog knows, and no more: the worker did not answer within its grace.
        expect(event.type === "failed" && event.message).toMatch(
          /did not answer within watchdogGraceMs \(50 ms\) after it: a long built-in call .* or a machine too busy/,
        );
        // The watchdog ended it at its deadline by replacing the worker: a sort left to finish would
        // have reached the interrupt afterwards, failing with the same code on the same worker.
        expect(lonely.stats().workersReplaced).toBe(before + 1);
        // The run that shared the worker fails; the replacement worker serves new runs.
        expect(await bystander.next()).toMatchObject({ type: "failed", code: "internal_error" });
        // Its caller, still delivering results or suspending, learns the run's own failure, never a
        // misleading invalid_input of its own making.
        expect(() => bystander.settle("r1", { ok: true, value: 1 })).not.toThrow();
        await expect(bystander.suspend()).rejects.toMatchObject({ code: "internal_error" });
        expect(await runToEnd(lonely, "return 2")).toMatchObject({
          event: { type: "completed", value: 2 },
        });
      } finally {
        await lonely.close();
      }
    }, 60_000); // Building the 3e6-element array alone takes seconds on a loaded machine.
  });

  describe("memory", () => {
    const bombs = [
      { name: "array fill", code: "const a = []; for (;;) a.push({ i: a.length, s: 'x' + a.length });" },
      { name: "string growth", code: "let s = 'x'; for (;;) s += s;" },
      {
        name: "a large ArrayBuffer",
        code: "const b = new ArrayBuffer(512 * 1024 * 1024); return b.byteLength",
      },
      { name: "many typed arrays", code: "const all = []; for (;;) all.push(new Float64Array(65536));" },
    ];
    it.each(bombs)("stops $name with memory_limit_exceeded", async ({ code }) => {
      const { event } = await runToEnd(pool, code, {
        limits: { ...limits, memoryLimitBytes: 16 * 1024 * 1024 },
      });
      expect(event).toMatchObject({ type: "failed", code: "memory_limit_exceeded" });
      expect(await runToEnd(pool, "return [1, 2, 3].length")).toMatchObject({
        event: { type: "completed", value: 3 },
      });
    });

    it("turns deep recursion into a catchable RangeError and the worker stays usable", async () => {
      const lonely = createSandboxPool({ size: 1 });
      try {
        const { event } = await runToEnd(
          lonely,
          "function down(n) { return down(n + 1) + 1; } try { down(0); } catch (e) { return e instanceof RangeError; }",
        );
        expect(event).toMatchObject({ type: "completed", value: true });
        const uncaught = await runToEnd(
          lonely,
          "function down(n) { return down(n + 1) + 1; } return down(0);",
        );
        expect(uncaught.event).toMatchObject({ type: "failed" });
        if (uncaught.event.type === "failed") expect(uncaught.event.message).toMatch(/RangeError/);
        expect(await runToEnd(lonely, "return 'same worker, fine'")).toMatchObject({
          event: { value: "same worker, fine" },
        });
      } finally {
        await lonely.close();
      }
    });
  });

  describe("output", () => {
    const small = { ...limits, maxOutputBytes: 2_048 };
    const cases = [
      { name: "one huge text", code: "text('x'.repeat(10_000)); return 1" },
      { name: "output in a loop", code: "for (;;) text('line')" },
      {
        name: "json in a loop, caught errors do not help",
        code: "for (;;) { try { json({ a: 'b'.repeat(100) }); } catch {} }",
      },
      { name: "a huge return value", code: "return 'y'.repeat(5_000)" },
      {
        name: "text plus a return value together",
        code: "text('z'.repeat(1_500)); return 'w'.repeat(1_000)",
      },
    ];
    it.each(cases)("fails $name with output_limit_exceeded", async ({ code }) => {
      const { event } = await runToEnd(pool, code, { limits: small });
      expect(event).toMatchObject({ type: "failed", code: "output_limit_exceeded" });
      if (event.type === "failed") expect(event.message).toMatch(/maxOutputBytes 2048/);
    });

    it("counts output produced before the run went idle", async () => {
      const { event } = await runToEnd(
        pool,
        "text('a'.repeat(1_500)); await tools.call('x', {}); text('b'.repeat(1_000));",
        {
          surface,
          limits: small,
          answer: () => ({ ok: true, value: 1 }),
        },
      );
      expect(event).toMatchObject({ type: "failed", code: "output_limit_exceeded" });
    });
  });

  describe("guest errors", () => {
    it("clips a huge thrown message before it reaches the host", async () => {
      const { event } = await runToEnd(pool, "throw new Error('m'.repeat(3_000_000))");
      expect(event.type).toBe("failed");
      if (event.type !== "failed") return;
      expect(event.code).toBeUndefined();
      expect(event.error?.message.length).toBeLessThanOrEqual(8_192);
      expect(event.message.length).toBeLessThan(9_000);
    });
  });

  describe("pending calls and aborts", () => {
    it("survives thousands of calls beyond maxPendingToolCalls", async () => {
      const code = `
      const calls = [];
      for (let i = 0; i < 5000; i++) calls.push(tools.call("x", { i }).then(() => "ok", (e) => e.code));
      const results = await Promise.all(calls);
      return { ok: results.filter((r) => r === "ok").length, refused: results.filter((r) => r === "too_many_pending_tool_calls").length };
    `;
      const { event } = await runToEnd(pool, code, {
        surface,
        limits: { ...limits, maxPendingToolCalls: 128 },
        answer: () => ({ ok: true, value: null }),
      });
      expect(event).toMatchObject({ type: "completed", value: { ok: 128, refused: 4872 } });
    });

    it("aborts a spinning cell", async () => {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const { event } = await runToEnd(pool, "while (true) {}", {
        signal: controller.signal,
        deadlineAt: Date.now() + 10_000,
      });
      expect(event).toMatchObject({ type: "failed", code: "aborted" });
    });

    it("aborts an idle run at once and an already aborted run before it starts", async () => {
      const controller = new AbortController();
      const { run } = await runToEnd(pool, "return await tools.call('x', {})", {
        surface,
        signal: controller.signal,
        stopOnIdle: true,
      });
      controller.abort();
      expect(await run.next()).toMatchObject({ type: "failed", code: "aborted" });
      const { event } = await runToEnd(pool, "return 1", { signal: AbortSignal.abort() });
      expect(event).toMatchObject({ type: "failed", code: "aborted" });
    });
  });

  describe("runtime", () => {
    it("fails every run with runtime_unavailable when quickjs.wasm cannot load, with no fallback", async () => {
      const broken = createSandboxPool({ size: 1, wasm: "/nonexistent/quickjs.wasm" });
      try {
        for (let index = 0; index < 2; index++) {
          const { event } = await runToEnd(broken, "return 1");
          expect(event).toMatchObject({ type: "failed", code: "runtime_unavailable" });
          if (event.type === "failed") expect(event.message).toMatch(/nonexistent/);
        }
      } finally {
        await broken.close();
      }
    });

    it("fails with runtime_unavailable when the module compiles but is not QuickJS", async () => {
      const directory = mkdtempSync(join(tmpdir(), "codecell-wasm-"));
      const path = join(directory, "empty.wasm");
      writeFileSync(path, new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
      const broken = createSandboxPool({ size: 1, wasm: path });
      try {
        const { event } = await runToEnd(broken, "return 1");
        expect(event).toMatchObject({ type: "failed", code: "runtime_unavailable" });
      } finally {
        await broken.close();
        rmSync(directory, { recursive: true, force: true });
      }
    });

    it("runs many cells concurrently, each in a fresh VM", async () => {
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, index) =>
          runToEnd(
            pool,
            `if (globalThis.leak) return "shared!"; globalThis.leak = ${index}; return ${index}`,
          ),
        ),
      );
      expect(
        results.map((result) => (result.event.type === "completed" ? result.event.value : result.event)),
      ).toEqual(Array.from({ length: 24 }, (_, index) => index));
    });
  });
});

describe("the removed thread option", () => {
  it.each(["in-thread", "main", 1])("refuses thread: %j with invalid_input naming the option", (thread) => {
    const options = { size: 1, thread } as Parameters<typeof createSandboxPool>[0];
    expect(() => createSandboxPool(options)).toThrow(
      expect.objectContaining({
        code: "invalid_input",
        message: expect.stringMatching(/thread was removed: cells always run on worker threads/),
      }),
    );
  });

  it('still takes thread: "worker", the only mode there is', async () => {
    const pool = createSandboxPool({ size: 1, thread: "worker" } as Parameters<typeof createSandboxPool>[0]);
    try {
      const { event } = await runToEnd(pool, "return 1 + 1");
      expect(event).toMatchObject({ type: "completed", value: 2 });
    } finally {
      await pool.close();
    }
  });
});
