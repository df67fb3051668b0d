import { describe, expect, it } from "vitest";
import { CodeModeError } from "./code-mode-error.js";
import { CODE_MODE_ERROR_CODES, isCodeModeErrorCode } from "./error-codes.js";
import { closestMatches } from "./suggestions.js";

describe("error codes", () => {
  it("is the closed set of sixteen", () => {
    expect(CODE_MODE_ERROR_CODES).toHaveLength(16);
    expect(new Set(CODE_MODE_ERROR_CODES).size).toBe(16);
    expect(isCodeModeErrorCode("timeout")).toBe(true);
    expect(isCodeModeErrorCode("TIMEOUT")).toBe(false);
    expect(isCodeModeErrorCode(undefined)).toBe(false);
  });
});

describe("CodeModeError", () => {
  it("carries a code and JSON details and turns into plain data", () => {
    const error = new CodeModeError("timeout", "took too long", { limitMs: 100 });
    expect(error).toBeInstanceOf(Error);
    expect(error.toData()).toEqual({
      name: "CodeModeError",
      message: "took too long",
      code: "timeout",
      details: { limitMs: 100 },
    });
    expect(JSON.parse(JSON.stringify(error.toData()))).toEqual(error.toData());
  });

  it("is recognised by brand across copies of the package, not only by instanceof", () => {
    const foreign = Object.assign(new Error("x"), { code: "aborted" });
    Object.defineProperty(foreign, Symbol.for("codecell.CodeModeError"), { value: true });
    expect(foreign instanceof CodeModeError).toBe(false);
    expect(CodeModeError.is(foreign)).toBe(true);
  });

  it.each([
    ["a plain error", new Error("x")],
    ["an object with a code", { code: "timeout" }],
    [
      "a branded value with a foreign code",
      Object.defineProperty({ code: "nope" }, Symbol.for("codecell.CodeModeError"), { value: true }),
    ],
    ["null", null],
  ])("does not recognise %s", (_name, value) => {
    expect(CodeModeError.is(value)).toBe(false);
  });
});

describe("closestMatches", () => {
  it.each([
    ["timeoutMS", ["timeoutMs", "mode"], ["timeoutMs"]],
    ["raed_file", ["read_file", "write_file", "list_dir"], ["read_file"]],
    ["zzz", ["read_file"], []],
  ])("%s", (word, candidates, expected) => {
    expect(closestMatches(word, candidates)).toEqual(expected);
  });
});
