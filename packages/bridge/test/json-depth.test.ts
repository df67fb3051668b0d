import { describe, expect, it } from "vitest";
import { toJsonText, toJsonValue } from "../src/json-adapter.js";
import { exceedsJsonDepth, MAX_BRIDGE_DEPTH } from "../src/json-depth.js";

const nested = (depth: number): unknown => {
  let value: unknown = 1;
  for (let index = 0; index < depth; index++) value = index % 2 === 0 ? { value } : [value];
  return value;
};

describe("exceedsJsonDepth", () => {
  it.each([
    ["a scalar", "1", 1, false],
    ["flat data at the limit", JSON.stringify(nested(4)), 4, false],
    ["one level over", JSON.stringify(nested(5)), 4, true],
    ["brackets inside strings", JSON.stringify({ a: "[[[[[[[[[[{{{{{{{{{{" }), 2, false],
    ["escaped quotes inside strings", JSON.stringify({ a: 'x\\"[[[[[[[[', b: [[[[1]]]] }), 5, false],
    ["escaped quotes, then too deep", JSON.stringify({ a: 'x\\"', b: [[[[[1]]]]] }), 5, true],
    ["siblings that each stay shallow", JSON.stringify([[[1]], [[2]], [[3]], { a: [[4]] }]), 4, false],
  ])("%s", (_name, text, limit, expected) => {
    expect(exceedsJsonDepth(text as string, limit as number)).toBe(expected);
  });

  it("uses MAX_BRIDGE_DEPTH by default", () => {
    expect(exceedsJsonDepth(JSON.stringify(nested(MAX_BRIDGE_DEPTH)))).toBe(false);
    expect(exceedsJsonDepth(JSON.stringify(nested(MAX_BRIDGE_DEPTH + 1)))).toBe(true);
  });
});

describe("toJsonValue depth", () => {
  it("refuses a host value nested past the limit with the caller's code and the path", () => {
    expect(() =>
      toJsonValue(new Map([["deep", nested(MAX_BRIDGE_DEPTH + 5)]]), { errorCode: "nested_tool_failed" }),
    ).toThrow(
      expect.objectContaining({
        code: "nested_tool_failed",
        message: expect.stringMatching(/deeper than 256/),
      }),
    );
  });

  it("refuses a value too deep for JSON.stringify instead of overflowing the stack", () => {
    expect(() => toJsonText(nested(200_000), { maxBytes: 1e9, errorCode: "nested_tool_failed" })).toThrow(
      expect.objectContaining({ code: "nested_tool_failed" }),
    );
  });
});
