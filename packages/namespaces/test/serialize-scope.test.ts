import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { createCodeModeNamespaceTool } from "../src/namespace-tool.js";
import { serializeScope, toJsonInput } from "../src/serialize-scope.js";

const list = createCodeModeNamespaceTool("list_issues");

function refusal(scope: unknown): string {
  try {
    serializeScope(scope, "Namespace test");
  } catch (error) {
    expect(CodeModeError.is(error)).toBe(true);
    expect((error as CodeModeError).code).toBe("invalid_config");
    return (error as CodeModeError).message;
  }
  throw new Error("scope was accepted");
}

describe("scope serialization", () => {
  it("writes markers as {$codecellCall: path} and collects their paths", () => {
    const { scope, callables } = serializeScope(
      { repo: "acme/app", list, admin: { close: list }, steps: [list, 1] },
      "Namespace test",
    );
    expect(scope).toEqual({
      repo: "acme/app",
      list: { $codecellCall: "list" },
      admin: { close: { $codecellCall: "admin.close" } },
      steps: [{ $codecellCall: "steps.0" }, 1],
    });
    expect(callables.map((callable) => callable.path)).toEqual(["list", "admin.close", "steps.0"]);
  });

  it("writes shared references out at every place, markers included", () => {
    const shared = { labels: ["bug", "ui"], call: list };
    const { scope, callables } = serializeScope({ a: shared, b: { inner: shared } }, "Namespace test");
    expect(scope).toEqual({
      a: { labels: ["bug", "ui"], call: { $codecellCall: "a.call" } },
      b: { inner: { labels: ["bug", "ui"], call: { $codecellCall: "b.inner.call" } } },
    });
    expect(callables.map((callable) => callable.path)).toEqual(["a.call", "b.inner.call"]);
  });

  it.each([
    ["a raw function", { list: async () => [] }, "list is a raw function"],
    ["a nested raw function", { admin: { close() {} } }, "admin.close is a raw function"],
    ["a function in an array", { steps: [() => 1] }, "steps.0 is a raw function"],
    [
      "a cycle",
      (() => {
        const node: Record<string, unknown> = {};
        node["self"] = node;
        return node;
      })(),
      "self refers back",
    ],
    ["a promise", { data: Promise.resolve(1) }, "data is a promise"],
    ["an own __proto__ key", JSON.parse('{"__proto__": {"x": 1}}'), 'unsafe key "__proto__"'],
    ["a constructor key", { constructor: 1 }, 'unsafe key "constructor"'],
    ["a prototype key", { nested: { prototype: {} } }, 'unsafe key "prototype"'],
    ["an empty key", { "": 1 }, 'unsafe key ""'],
    ["a key holding the separator", { "a.b": 1 }, 'unsafe key "a.b"'],
    ["a look-alike marker key", { fake: { $codecellCall: "list" } }, 'unsafe key "$codecellCall"'],
    ["an array at the root", [list], "plain object"],
    ["a marker at the root", list, "plain object"],
    ["a string at the root", "scope", "plain object"],
  ])("refuses %s", (_case, scope, fragment) => {
    expect(refusal(scope)).toContain(fragment);
  });

  it("refuses scopes nested too deep", () => {
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let level = 0; level < 40; level++) deep = { next: deep };
    expect(refusal(deep)).toContain("nests deeper than 32");
  });

  it.each([
    ["NaN", Number.NaN, null],
    ["Infinity", Number.POSITIVE_INFINITY, null],
    ["a bigint", 12n, "12"],
    ["a date", new Date("2026-01-02T03:04:05.000Z"), "2026-01-02T03:04:05.000Z"],
    ["a map", new Map([["k", 1]]), [["k", 1]]],
    ["a set", new Set(["a", "b"]), ["a", "b"]],
    ["an error", new TypeError("bad"), { name: "TypeError", message: "bad" }],
    ["binary data", new Uint8Array(4), "[binary data, 4 bytes: not supported here]"],
    [
      "a class instance",
      new (class Point {
        x = 1;
        y = 2;
      })(),
      { x: 1, y: 2 },
    ],
    ["undefined in an array", [undefined, 1], [null, 1]],
  ])("turns %s into a JSON-safe value", (_case, value, expected) => {
    expect(serializeScope({ value }, "Namespace test").scope).toEqual({ value: expected });
  });

  it("drops undefined and symbol members like JSON does", () => {
    expect(serializeScope({ a: undefined, b: Symbol("s"), c: 1 }, "Namespace test").scope).toEqual({ c: 1 });
  });
});

describe("input conversion", () => {
  it("allows any data keys in tool input, keeping __proto__ an ordinary key", () => {
    const input = toJsonInput(
      JSON.parse('{"a.txt": "x", "__proto__": {"polluted": true}}'),
      "input",
    ) as Record<string, unknown>;
    expect(Object.keys(input)).toEqual(["a.txt", "__proto__"]);
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });

  it("maps undefined to {} and refuses functions and markers", () => {
    expect(toJsonInput(undefined, "input")).toEqual({});
    expect(() => toJsonInput({ fn: () => 1 }, "input")).toThrow(/raw function/);
    expect(() => toJsonInput({ again: list }, "input")).toThrow(/namespace tool marker/);
  });
});
