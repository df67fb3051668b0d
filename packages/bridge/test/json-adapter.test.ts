import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { parseJsonText, toJsonText, toJsonValue } from "../src/json-adapter.js";

const symbolKey = Symbol("s");

/** Plain objects nested `depth` deep, deeper than the fast path's plain-data check looks. */
function nestedPlain(depth: number): unknown {
  let value: unknown = { leaf: "x" };
  for (let level = 0; level < depth; level++) value = { level, child: value };
  return value;
}

describe("toJsonValue fallbacks", () => {
  const cases: Array<{ name: string; input: unknown; expected: unknown }> = [
    {
      name: "plain JSON passes unchanged",
      input: { a: [1, "x", true, null] },
      expected: { a: [1, "x", true, null] },
    },
    { name: "top-level undefined is null", input: undefined, expected: null },
    { name: "undefined members are dropped", input: { a: undefined, b: 1 }, expected: { b: 1 } },
    { name: "undefined in arrays is null", input: [undefined, 1], expected: [null, 1] },
    {
      name: "functions and symbols are dropped from objects",
      input: { f() {}, s: symbolKey, k: 1 },
      expected: { k: 1 },
    },
    { name: "functions in arrays are null", input: [() => 1, symbolKey], expected: [null, null] },
    {
      name: "BigInt is a decimal string",
      input: { n: 12345678901234567890n },
      expected: { n: "12345678901234567890" },
    },
    { name: "Date is an ISO string", input: new Date(0), expected: "1970-01-01T00:00:00.000Z" },
    { name: "invalid Date is null", input: new Date(Number.NaN), expected: null },
    {
      name: "Map is a list of pairs",
      input: new Map<unknown, unknown>([
        ["a", 1],
        [2, new Set([3])],
      ]),
      expected: [
        ["a", 1],
        [2, [3]],
      ],
    },
    { name: "Set is a list", input: new Set(["a", "b"]), expected: ["a", "b"] },
    {
      name: "NaN and Infinity are null",
      input: [Number.NaN, Number.POSITIVE_INFINITY],
      expected: [null, null],
    },
    {
      name: "Error is name and message",
      input: new TypeError("bad"),
      expected: { name: "TypeError", message: "bad" },
    },
    {
      name: "Error with a code keeps it",
      input: Object.assign(new Error("no"), { code: "E1" }),
      expected: { name: "Error", message: "no", code: "E1" },
    },
    { name: "toJSON is honoured", input: { toJSON: () => ({ x: 1 }) }, expected: { x: 1 } },
    {
      name: "shared references are fine",
      input: (() => {
        const s = { v: 1 };
        return [s, s];
      })(),
      expected: [{ v: 1 }, { v: 1 }],
    },
  ];
  it.each(cases)("$name", ({ input, expected }) => {
    expect(toJsonValue(input)).toEqual(expected);
  });

  const refusals: Array<{ name: string; input: unknown; message: RegExp }> = [
    {
      name: "cycle",
      input: (() => {
        const a: Record<string, unknown> = {};
        a.self = { a };
        return a;
      })(),
      message: /cycle at \$\.self\.a/,
    },
    { name: "ArrayBuffer", input: { b: new ArrayBuffer(2) }, message: /binary value at \$\.b/ },
    { name: "typed array", input: [new Uint8Array(2)], message: /binary value at \$\[0\]/ },
    { name: "DataView", input: new DataView(new ArrayBuffer(1)), message: /binary value/ },
  ];
  it.each(refusals)("refuses a $name with a clear error", ({ input, message }) => {
    let thrown: unknown;
    try {
      toJsonValue(input, { label: "tool result" });
    } catch (error) {
      thrown = error;
    }
    expect(CodeModeError.is(thrown)).toBe(true);
    expect((thrown as CodeModeError).code).toBe("invalid_input");
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).toMatch(/tool result/);
  });
});

describe("toJsonText", () => {
  it("measures UTF-8 bytes and enforces the cap", () => {
    expect(toJsonText("é", { maxBytes: 10 })).toEqual({ text: '"é"', bytes: 4, shallow: true });
    expect(() => toJsonText("x".repeat(100), { maxBytes: 50, errorCode: "output_limit_exceeded" })).toThrow(
      expect.objectContaining({ code: "output_limit_exceeded" }),
    );
  });

  it("keeps a __proto__ key as data, never a prototype", () => {
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}');
    const { text } = toJsonText(hostile, { maxBytes: 1000 });
    const back = parseJsonText(text) as Record<string, unknown>;
    expect(Object.hasOwn(back, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
  });

  it("reports invalid JSON from the sandbox as internal_error", () => {
    expect(() => parseJsonText("{nope", "result")).toThrow(
      expect.objectContaining({ code: "internal_error" }),
    );
  });
});

describe("toJsonText fast path", () => {
  const shared = { v: 1 };
  const cases: unknown[] = [
    { a: 1, b: [1, "x", null, true], c: { d: { e: "f" } } },
    { n: 5n, when: new Date(0), nested: [new Map([["k", new Set([1])]]), new TypeError("t")] },
    [undefined, () => 1, Symbol("s"), Number.NaN],
    { u: undefined, f() {}, keep: 1 },
    undefined,
    [shared, shared],
    Object.assign(Object.create(null), { bare: true }),
    new (class Point {
      x = 1;
      y = 2;
    })(),
    // Plain data all the way down (written without the replacer), and values that look plain at the
    // top but are not below it, or turn into something else on the way (a toJSON returning a Map).
    Array.from({ length: 50 }, (_, index) => ({ id: `item-${index}`, score: index / 3, tags: ["a", null] })),
    { outer: [{ inner: { deep: [1, 2, { map: new Map([["k", 1]]) }] } }] },
    { list: [1, 2, 3n] },
    { toJSON: () => new Map([["a", 1]]) },
    { when: { at: new Date(0) } },
    { bytes: { ok: 1, nested: { error: new RangeError("r") } } },
    Object.assign(Object.create(null), { child: Object.assign(Object.create(null), { x: [true] }) }),
    nestedPlain(100),
  ];
  it.each(cases.map((value, index) => ({ index, value })))(
    "matches the full conversion for case $index",
    ({ value }) => {
      expect(toJsonText(value, { maxBytes: 1 << 20 }).text).toBe(JSON.stringify(toJsonValue(value)));
    },
  );

  it("refuses binary data nested inside plain data, naming its path", () => {
    expect(() => toJsonText({ a: [{ b: new Uint8Array(1) }] }, { maxBytes: 1 << 20 })).toThrow(
      /binary value at \$\.a\[0\]\.b/,
    );
  });

  it("marks as shallow only text it knows nests far less than the bridge limit", () => {
    const shallow = (value: unknown) => toJsonText(value, { maxBytes: 1 << 20 }).shallow;
    // Primitives, and plain data the fast path walked (to 64 levels).
    expect(shallow(42)).toBe(true);
    expect(shallow("text")).toBe(true);
    expect(shallow(null)).toBe(true);
    expect(shallow(undefined)).toBe(true);
    expect(shallow({ items: [{ id: 1, tags: ["a"] }] })).toBe(true);
    expect(shallow(nestedPlain(60))).toBe(true);
    // Anything the check did not walk to the end: the reader scans it.
    expect(shallow(nestedPlain(100))).toBe(false);
    expect(shallow({ when: new Date(0) })).toBe(false);
    expect(shallow({ n: 1n })).toBe(false);
    expect(shallow(new Map([["a", 1]]))).toBe(false);
    expect(shallow({ toJSON: () => ({ a: 1 }) })).toBe(false);
  });

  it("trusts no walk when host code gave every object a toJSON", () => {
    Object.defineProperty(Object.prototype, "toJSON", {
      value() {
        return "replaced";
      },
      configurable: true,
      enumerable: false,
    });
    try {
      const result = toJsonText({ a: 1 }, { maxBytes: 1 << 20 });
      expect(result.shallow).toBe(false);
      expect(result.text).toBe('"replaced"');
    } finally {
      delete (Object.prototype as { toJSON?: unknown }).toJSON;
    }
  });

  it("still names the path of a cycle found by the fast path", () => {
    const a: Record<string, unknown> = { list: [] };
    (a.list as unknown[]).push(a);
    expect(() => toJsonText(a, { maxBytes: 1 << 20 })).toThrow(/cycle at \$\.list\[0\]/);
  });
});
