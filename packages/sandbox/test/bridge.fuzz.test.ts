import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { runToEnd, surface } from "./helpers.js";

/**
 * Property-based fuzzing of values crossing the bridge both ways. CI runs a bounded number of cases;
 * `pnpm fuzz` (FUZZ_RUNS, default there 300) runs many more. Properties: nothing the guest or a host
 * result contains makes the host throw; every failure carries a code from the closed set (or is the
 * guest's own error); plain JSON survives the trip unchanged; time and the host's memory stay bounded
 * whatever the guest allocates.
 */

const runs = Number(process.env.FUZZ_RUNS ?? 20);
const pool = createSandboxPool({ size: 2 });
afterAll(() => pool.close());

const CODES = new Set([
  "invalid_input",
  "nested_tool_failed",
  "output_limit_exceeded",
  "memory_limit_exceeded",
  "timeout",
  "too_many_pending_tool_calls",
]);

// Plain JSON, including keys that are traps elsewhere (__proto__, constructor) and odd strings.
const key = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.constantFrom("__proto__", "constructor", "then", "toJSON", ""),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -0.5, 1e308, "", "\u2028", "\ud800"),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string({ maxLength: 30, unit: "binary" }),
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(key, tie("value"), { maxKeys: 5 }),
  ),
})).value;

// Anything a host might hand back as a tool result.
const hostValue = fc.oneof(
  json,
  fc.anything({
    withBigInt: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withTypedArray: true,
    withSparseArray: true,
    withNullPrototype: true,
    withBoxedValues: true,
    maxDepth: 4,
  }),
);

const normalize = (value: unknown) => JSON.parse(JSON.stringify(value) ?? "null") as unknown;

/** What a hostile value-building cell must end with, where the cause is certain; null: no claim. */
function expectedCode(piece: string, sink: string, size: number): string | null {
  const crosses = !sink.startsWith("text(");
  if (piece.includes("o = { o }") || piece.includes("o = [o]")) {
    if (!crosses) return null;
    if (size >= 300) return "invalid_input";
    return size <= 200 ? "ok" : null;
  }
  if (piece.includes("'x'.repeat")) {
    const bytes = size * 100;
    if (bytes > 70_000) return "output_limit_exceeded";
    return bytes < 60_000 ? "ok" : null;
  }
  return null;
}

describe("bridge fuzz", () => {
  it("returns any JSON value from the guest unchanged", async () => {
    await fc.assert(
      fc.asyncProperty(json, async (value) => {
        const { event } = await runToEnd(pool, `return JSON.parse(${JSON.stringify(JSON.stringify(value))})`);
        expect(event).toMatchObject({ type: "completed" });
        if (event.type === "completed") expect(event.value).toEqual(normalize(value));
      }),
      { numRuns: runs },
    );
  }, 120_000);

  it("sends any JSON tool input to the host unchanged", async () => {
    await fc.assert(
      fc.asyncProperty(json, async (value) => {
        const { requests } = await runToEnd(
          pool,
          `return await tools.call("read_file", JSON.parse(${JSON.stringify(JSON.stringify(value))}))`,
          { surface, answer: () => ({ ok: true, value: 1 }) },
        );
        expect(requests).toHaveLength(1);
        const request = requests[0] as { input: unknown };
        // Only a missing input becomes `{}`; anything else (null included) reaches the host as sent.
        expect(request.input).toEqual(normalize(value));
      }),
      { numRuns: runs },
    );
  }, 120_000);

  it("delivers any host result as data or as a coded error, never a host exception", async () => {
    await fc.assert(
      fc.asyncProperty(hostValue, fc.boolean(), async (value, asError) => {
        const { event } = await runToEnd(
          pool,
          `try { const r = await tools.call("read_file", {}); return { ok: true, r }; } catch (e) { return { ok: false, name: e.name, code: e.code ?? null }; }`,
          {
            surface,
            answer: () =>
              asError
                ? {
                    ok: false,
                    error: { name: "E", message: String(typeof value), code: "nested_tool_failed" },
                  }
                : { ok: true, value },
          },
        );
        expect(event.type).toBe("completed");
        if (event.type !== "completed") return;
        const result = event.value as { ok: boolean; code: string | null };
        if (!result.ok) expect(CODES.has(result.code as string)).toBe(true);
      }),
      { numRuns: runs },
    );
  }, 120_000);

  it("ends every hostile value-building cell with a result or a failure from the closed set", async () => {
    const pieces = fc.constantFrom(
      "let o = {}; for (let i = 0; i < N; i++) o = { o };",
      "let o = []; for (let i = 0; i < N; i++) o = [o];",
      "let o = 'x'.repeat(N * 100);",
      "let o = new Map([[1, { a: N }]]);",
      "let o = { toJSON() { return { n: N }; } };",
      "let o = new Proxy({}, { ownKeys() { return ['a']; }, getOwnPropertyDescriptor() { return { value: N, enumerable: true, configurable: true }; } });",
      "let o = Array.from({ length: N }, (_, i) => i);",
    );
    const sinks = fc.constantFrom(
      "return o;",
      "json(o); return 1;",
      "return await tools.call('read_file', o);",
      "text(o); return 1;",
    );
    await fc.assert(
      fc.asyncProperty(pieces, sinks, fc.integer({ min: 0, max: 5000 }), async (piece, sink, size) => {
        const started = Date.now();
        const { event } = await runToEnd(pool, `${piece.replaceAll("N", String(size))} ${sink}`, {
          surface,
          deadlineAt: started + 5_000,
          answer: (request) => ({ ok: true, value: (request as { input?: unknown }).input ?? null }),
        });
        // Bounded in time: every run ends by its deadline plus the watchdog's grace (loose margin for a
        // loaded machine; a hang would run into the test's own timeout instead).
        expect(Date.now() - started).toBeLessThan(15_000);
        expect(["completed", "failed"]).toContain(event.type);
        if (event.type === "failed" && event.code !== undefined) expect(CODES.has(event.code)).toBe(true);
        // The right code where the cause is known: too deep to cross, or over maxOutputBytes (64 KiB).
        const expected = expectedCode(piece, sink, size);
        if (expected === "ok") expect(event.type).toBe("completed");
        else if (expected !== null) expect(event).toMatchObject({ type: "failed", code: expected });
      }),
      { numRuns: runs },
    );
  }, 180_000);

  it("keeps the host's memory bounded whatever the guest allocates, and names the limit", async () => {
    // Allocation patterns a cell can use to grow memory: arrays of strings, doubling strings, typed
    // buffers, wide objects, closures kept alive. Each is sized from nothing to far past the 32 MiB limit.
    const pieces = fc.constantFrom(
      "let a = []; for (let i = 0; i < N; i++) a.push('x'.repeat(200) + i);",
      "let a = 'xy'; for (let i = 0; i < Math.min(N, 40); i++) a = a + a;",
      "let a = []; for (let i = 0; i < N; i++) a.push(new ArrayBuffer(4096));",
      "let a = {}; for (let i = 0; i < N; i++) a['k' + i] = { i, s: 'v' + i };",
      "let a = []; for (let i = 0; i < N; i++) { const big = new Array(64).fill(i); a.push(() => big); }",
    );
    const rssLimit = process.memoryUsage().rss + 768 * 1024 * 1024;
    let peakRss = 0;
    await fc.assert(
      fc.asyncProperty(pieces, fc.integer({ min: 0, max: 400_000 }), async (piece, size) => {
        const started = Date.now();
        const { event } = await runToEnd(pool, `${piece.replaceAll("N", String(size))} return 1;`, {
          deadlineAt: started + 5_000,
        });
        expect(Date.now() - started).toBeLessThan(15_000);
        if (event.type === "failed") {
          // Running out of memory (or out of time while allocating) is named as such; never another code.
          expect(["memory_limit_exceeded", "timeout"]).toContain(event.code);
        } else {
          expect(event).toMatchObject({ type: "completed", value: 1 });
        }
        // The guest's memory lives in its worker's bounded heap: the host process never balloons.
        const { rss } = process.memoryUsage();
        peakRss = Math.max(peakRss, rss);
        expect(rss).toBeLessThan(rssLimit);
      }),
      { numRuns: runs },
    );
    expect(peakRss).toBeGreaterThan(0);
  }, 240_000);
});
