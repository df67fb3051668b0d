import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type HostRequest } from "../src/index.js";
import { limits, runToEnd, surface } from "./helpers.js";

// A cell without a `return` of its own that ends with an expression gives that expression's value, as
// models write cells: a bare expression, a call of their own function, an async function never called.
describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  afterAll(() => pool.close());

  it.each([
    ["a bare expression", "1 + 1", 2],
    ["a bare expression after statements", "const a = [1, 2, 3];\na.map((n) => n * 2)", [2, 4, 6]],
    ["an awaited expression with a trailing semicolon and comment", "await Promise.resolve(7); // done", 7],
    [
      "an async arrow never called",
      "async () => {\n  const v = await Promise.resolve(5);\n  return v * 2;\n}",
      10,
    ],
    ["an arrow never called, on one line", "() => 'body ran'", "body ran"],
    ["a function expression never called", "(async function () { return 'fn'; })", "fn"],
    ["an async arrow called at once", "(async () => {\n  return 'iife';\n})()", "iife"],
    ["a call of the cell's own function", "async function main() {\n  return 6;\n}\nmain();", 6],
    ["an expression after a line of comments", "// the answer\n40 + 2", 42],
    ["a statement without a semicolon, the result on the next line", "const a = 20\na + 1", 21],
  ])("%s", async (_name, code, value) => {
    const { event } = await runToEnd(pool, code);
    expect(event).toMatchObject({ type: "completed", value });
  });

  it("runs TypeScript cells the same way", async () => {
    const { event } = await runToEnd(pool, "const n: number = 4;\nn * 10", { language: "typescript" });
    expect(event).toMatchObject({ type: "completed", value: 40 });
  });

  it("does not call a function that takes parameters: the cell fails, naming what it returned", async () => {
    const { event } = await runToEnd(pool, "async (input) => input");
    expect(event).toMatchObject({
      type: "failed",
      message: expect.stringMatching(/^TypeError: the returned value is a function/),
    });
  });

  it.each([
    ["a return in a branch", "if (false) { return 1 }\n2", null],
    ["a declaration last", "const a = 1;\nfunction f() { return a }", null],
    ["a side effect only", "[1, 2].forEach(() => {});\nundefined", null],
  ])("leaves the value alone with %s", async (_name, code, value) => {
    const { event } = await runToEnd(pool, code);
    expect(event).toMatchObject({ type: "completed", value });
  });

  // Where each error is reported, against a twin cell in which the same text is no result: the cell
  // again with `return 0` on a line after it (so it has a return and is run as written), or, for a
  // function the cell never calls, that function called by name (`shift` is what that moves line 1 by).
  it.each([
    ["a lone expression on line 1", "nope()", null, 0],
    ["a lone expression indented on line 1", "   globalThis.nope.boom", null, 0],
    ["a property read off a literal null, on line 3", "const a = 1;\n\n   null.boom", null, 0],
    ["a lone expression with the error inside it", "[1, 2].map((n) => n.a.b)", null, 0],
    ["a result on the line after a statement", "const a = 1\n  nope()", null, 0],
    ["a result after a comment line", "const a = {}; // note\na.b.c", null, 0],
    ["a result after a statement on the same line", "const a = {}; a.b.c", null, 0],
    ["a statement before the result", "const a = null.boom;\na", null, 0],
    [
      "an arrow's body on line 1",
      "async () => { const o = {}; o.p.q }",
      "const f = async () => { const o = {}; o.p.q }\nreturn await f()",
      10,
    ],
    [
      "an arrow's body on line 3",
      "async () => {\n  const a = 1;\n  a.b.c;\n}",
      "const f = async () => {\n  const a = 1;\n  a.b.c;\n}\nreturn await f()",
      0,
    ],
  ])("keeps the user's place in an error in %s", async (_name, code, twin, shift) => {
    const reference = place((await runToEnd(pool, twin ?? `${code}\nreturn 0`)).event);
    const found = place((await runToEnd(pool, code)).event);
    expect(found).toEqual({
      line: reference.line,
      column: reference.line === 1 ? reference.column - shift : reference.column,
    });
  });

  it("keeps line 1's columns across a snapshot of a lone expression", async () => {
    const code = "(async () => { const v = await yield_control('pause'); return v.missing.deeper })()";
    const answer = (request: HostRequest) => ({
      ok: true as const,
      value: request.kind === "yield" ? {} : null,
    });
    const reference = place((await runToEnd(pool, code, { surface, answer })).event);
    const run = pool.run({
      code,
      language: "javascript",
      surface,
      limits,
      deadlineAt: Date.now() + 5_000,
      onRequest: () => {},
    });
    expect(await run.next()).toMatchObject({ type: "idle" });
    const suspended = await run.suspend();
    const restored = pool.restore({
      snapshot: suspended.snapshot,
      limits,
      deadlineAt: Date.now() + 5_000,
      onRequest: () => {},
    });
    expect(await restored.next()).toMatchObject({ type: "idle" });
    restored.settle(suspended.pending[0]!.requestId, { ok: true, value: {} });
    expect(place(await restored.next())).toEqual(reference);
    expect(reference.line).toBe(1);
  });
});

/** The line and column a failed run's message gives. */
function place(event: { type: string; message?: string }): { line: number; column: number } {
  expect(event.type).toBe("failed");
  const found = /\(line (\d+), column (\d+)\)/.exec(event.message ?? "");
  expect(found, event.message).not.toBeNull();
  return { line: Number(found![1]), column: Number(found![2]) };
}
