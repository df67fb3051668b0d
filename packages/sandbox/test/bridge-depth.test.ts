import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { limits, runToEnd, surface } from "./helpers.js";

/**
 * Values nested far deeper than any real data, crossing the worker channel in either direction. V8's
 * structured-clone reader fails on them with a `messageerror` that belongs to no run; the worker must
 * refuse them first, at once and with a clear error, and the worker must keep serving other runs.
 */

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 1 });
  afterAll(() => pool.close());

  const nest = (depth: number) => `let deep = {}; for (let i = 0; i < ${depth}; i++) deep = { deep };`;
  // Generous: building 100,000 nested objects on a loaded 2-core machine takes seconds, and a deadline hit
  // here would test the watchdog instead of the depth bound (the refusals themselves take milliseconds).
  const deadlineAt = () => Date.now() + 15_000; // within vitest's 20 s test timeout

  describe("nesting depth across the bridge", () => {
    it.each([2_000, 100_000])("refuses a returned value %i levels deep with invalid_input", async (depth) => {
      const { event } = await runToEnd(pool, `${nest(depth)} return deep;`, { deadlineAt: deadlineAt() });
      expect(event).toMatchObject({ type: "failed" });
      if (event.type !== "failed") return;
      expect(event.code === "invalid_input" || event.code === undefined).toBe(true);
      expect(event.message).toMatch(/nest|deep/i);
    });

    it("refuses a tool input 2,000 levels deep with a catchable invalid_input error", async () => {
      const { event, requests } = await runToEnd(
        pool,
        `${nest(2_000)} try { await tools.call("read_file", deep); return "sent"; } catch (e) { return [e.name, e.code, e.message]; }`,
        { surface, deadlineAt: deadlineAt(), answer: () => ({ ok: true, value: 1 }) },
      );
      expect(requests).toEqual([]);
      expect(event).toMatchObject({
        type: "completed",
        value: ["CodeModeError", "invalid_input", expect.stringMatching(/256 levels/)],
      });
    });

    it("refuses json() output 2,000 levels deep, catchably", async () => {
      const { event } = await runToEnd(
        pool,
        `${nest(2_000)} try { json(deep); return "sent"; } catch (e) { return [e.code, e.message]; }`,
        { deadlineAt: deadlineAt() },
      );
      expect(event).toMatchObject({
        type: "completed",
        value: ["invalid_input", expect.stringMatching(/json\(\)/)],
      });
    });

    it("delivers a host result 2,000 levels deep as a nested_tool_failed error", async () => {
      let deep: unknown = {};
      for (let index = 0; index < 2_000; index++) deep = { deep };
      const { event } = await runToEnd(
        pool,
        `try { await tools.call("read_file", {}); return "delivered"; } catch (e) { return [e.code, e.message]; }`,
        { surface, deadlineAt: deadlineAt(), answer: () => ({ ok: true, value: deep }) },
      );
      expect(event).toMatchObject({
        type: "completed",
        value: ["nested_tool_failed", expect.stringMatching(/nests objects and arrays|deeper than/)],
      });
    });

    it("lets data as deep as the limit through both ways", async () => {
      const { event } = await runToEnd(
        pool,
        `${nest(250)} const back = await tools.call("read_file", deep); let n = 0; for (let v = back; v.deep; v = v.deep) n++; return [n, deep];`,
        {
          surface,
          deadlineAt: deadlineAt(),
          answer: (request) => ({ ok: true, value: (request as { input: unknown }).input }),
        },
      );
      expect(event.type).toBe("completed");
      expect((event as { value: unknown[] }).value[0]).toBe(250);
    });

    it("keeps another run on the same worker alive and correct", async () => {
      const bystander = pool.run({
        code: "return await tools.call('read_file', {})",
        language: "javascript",
        surface,
        limits,
        deadlineAt: Date.now() + 10_000,
        onRequest: () => {},
      });
      const idle = await bystander.next();
      expect(idle.type).toBe("idle");
      const hostile = await runToEnd(pool, `${nest(2_000)} return deep;`, { deadlineAt: deadlineAt() });
      expect(hostile.event.type).toBe("failed");
      expect(pool.stats().workersReplaced).toBe(0);
      if (idle.type === "idle")
        bystander.settle(idle.pending[0]!.requestId, { ok: true, value: "still here" });
      expect(await bystander.next()).toMatchObject({ type: "completed", value: "still here" });
    });
  });

  describe("engine size limits", () => {
    it.each([
      { name: '"x".repeat(2**30)', code: 'return "x".repeat(2 ** 30).length' },
      { name: "new Array(2**32-1).join()", code: "return new Array(2 ** 32 - 1).join().length" },
      {
        name: "a join with a long separator",
        code: "return new Array(2 ** 27).join('0123456789abcdef').length",
      },
      { name: "padStart past the string limit", code: "return 'x'.padStart(2 ** 30).length" },
    ])("reports $name as memory_limit_exceeded", async ({ code }) => {
      const { event } = await runToEnd(pool, code, { deadlineAt: deadlineAt() });
      expect(event).toMatchObject({ type: "failed", code: "memory_limit_exceeded" });
      if (event.type === "failed") expect(event.message).toMatch(/larger than the engine allows/);
    });

    it("leaves the size error catchable and join working", async () => {
      const { event } = await runToEnd(
        pool,
        `let caught; try { "x".repeat(2 ** 30); } catch (e) { caught = e.name; }
       return [caught, [1, 2, 3].join(), [1, [2, 3]].join("-"), Array.prototype.join.call({ length: 2, 0: "a", 1: "b" }, "+"), String([4, 5])];`,
        { deadlineAt: deadlineAt() },
      );
      expect(event).toMatchObject({
        type: "completed",
        value: ["RangeError", "1,2,3", "1-2,3", "a+b", "4,5"],
      });
    });
  });
});
