import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { isErrorData, MAX_ERROR_MESSAGE_LENGTH, toErrorData } from "../src/error-data.js";

describe("toErrorData", () => {
  const cases: Array<{ name: string; input: unknown; expected: unknown }> = [
    {
      name: "CodeModeError keeps code and JSON details",
      input: new CodeModeError("nested_tool_failed", "tool broke", { tool: "x" }),
      expected: {
        name: "CodeModeError",
        message: "tool broke",
        code: "nested_tool_failed",
        details: { tool: "x" },
      },
    },
    { name: "plain Error", input: new RangeError("r"), expected: { name: "RangeError", message: "r" } },
    {
      name: "Error with a known code",
      input: Object.assign(new Error("late"), { code: "timeout" }),
      expected: { name: "Error", message: "late", code: "timeout" },
    },
    {
      name: "Error with a foreign code drops it",
      input: Object.assign(new Error("e"), { code: "ENOENT" }),
      expected: { name: "Error", message: "e" },
    },
    { name: "a string", input: "boom", expected: { name: "Error", message: "boom" } },
    {
      name: "an error-like object",
      input: { name: "X", message: "y", code: "aborted" },
      expected: { name: "X", message: "y", code: "aborted" },
    },
    { name: "nothing", input: undefined, expected: { name: "Error", message: "unknown error" } },
  ];
  it.each(cases)("$name", ({ input, expected }) => {
    const data = toErrorData(input);
    expect(data).toEqual(expected);
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    expect(isErrorData(data)).toBe(true);
  });

  it("never carries a stack or a function", () => {
    const error = new Error("x");
    const data = toErrorData(error) as Record<string, unknown>;
    expect(data.stack).toBeUndefined();
    expect(Object.values(data).some((value) => typeof value === "function")).toBe(false);
  });

  it("clips huge messages", () => {
    expect(toErrorData(new Error("m".repeat(100_000))).message.length).toBe(MAX_ERROR_MESSAGE_LENGTH);
  });

  it("rejects malformed error data", () => {
    expect(isErrorData({ name: "E" })).toBe(false);
    expect(isErrorData({ name: "E", message: "m", code: "nope" })).toBe(false);
  });
});
