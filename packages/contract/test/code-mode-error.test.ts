import { describe, expect, it } from "vitest";
import { CodeModeError } from "../src/code-mode-error.js";
import { CODE_MODE_ERROR_CODES, isCodeModeErrorCode } from "../src/error-codes.js";
import { closestMatches } from "../src/suggestions.js";

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

  it("is recognised across copies of the package, by `is` and by instanceof", async () => {
    // A second instance of the module, as a bundle that inlines its own copy of this package has.
    const specifier = "../src/code-mode-error.js?second-copy";
    const copy = (await import(/* @vite-ignore */ specifier)) as typeof import("../src/code-mode-error.js");
    expect(copy.CodeModeError).not.toBe(CodeModeError);
    const foreign = new copy.CodeModeError("aborted", "x");
    expect(Object.getPrototypeOf(foreign)).not.toBe(CodeModeError.prototype);
    expect(CodeModeError.is(foreign)).toBe(true);
    expect(foreign instanceof CodeModeError).toBe(true);
    expect(new CodeModeError("timeout", "y") instanceof copy.CodeModeError).toBe(true);
  });

  it("leaves instanceof of a subclass to the subclass's own instances", () => {
    class LimitError extends CodeModeError {}
    expect(new LimitError("timeout", "x") instanceof LimitError).toBe(true);
    expect(new LimitError("timeout", "x") instanceof CodeModeError).toBe(true);
    expect(new CodeModeError("timeout", "x") instanceof LimitError).toBe(false);
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
    expect(value instanceof CodeModeError).toBe(false);
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
