import { describe, expect, it } from "vitest";
import { CodeModeError } from "../src/code-mode-error.js";
import { execInputJsonSchema, parseExecInput, parseWaitInput, waitInputJsonSchema } from "../src/inputs.js";

const both = ["javascript", "typescript"] as const;

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (CodeModeError.is(error)) return `${error.code}: ${error.message}`;
    throw error;
  }
  return "no error";
}

describe("exec input", () => {
  it.each([
    ["code only", { code: "return 1" }, { code: "return 1", language: "javascript" }],
    ["command alias", { command: "return 2" }, { code: "return 2", language: "javascript" }],
    ["matching code and command", { code: "x", command: "x" }, { code: "x", language: "javascript" }],
    [
      "typescript",
      { code: "let a: number = 1", language: "typescript" },
      { code: "let a: number = 1", language: "typescript" },
    ],
    ["blank command but code", { code: "return 3", command: "" }, "invalid_input"],
  ])("%s", (_name, input, expected) => {
    if (typeof expected === "string") {
      expect(codeOf(() => parseExecInput(input, both))).toMatch(new RegExp(`^${expected}`));
    } else {
      expect(parseExecInput(input, both)).toEqual(expected);
    }
  });

  it.each([
    ["not an object", "return 1", "invalid_input: exec input must be an object"],
    ["null", null, "invalid_input"],
    ["empty object", {}, 'invalid_input: exec needs a non-empty "code"'],
    ["blank code", { code: "   " }, 'invalid_input: exec needs a non-empty "code"'],
    ["code not a string", { code: 42 }, "invalid_input: exec input: code:"],
    ["differing code and command", { code: "a", command: "b" }, "invalid_input: exec got both"],
    ["unknown key", { code: "a", lang: "ts" }, 'invalid_input: exec input has unknown key(s) "lang"'],
    [
      "unknown language",
      { code: "a", language: "python" },
      'unsupported_language: exec language "python" is not supported',
    ],
  ])("refuses %s", (_name, input, expected) => {
    expect(codeOf(() => parseExecInput(input, both))).toContain(expected);
  });

  it.each([
    ["script", { script: "return 1" }, 'Use "code" for "script"'],
    ["source and lang", { source: "return 1", lang: "ts" }, 'Use "code" for "source", "language" for "lang"'],
    ["Code", { Code: "return 1" }, 'Use "code" for "Code"'],
  ])("names the key meant for %s", (_name, input, expected) => {
    const message = codeOf(() => parseExecInput(input, both));
    expect(message).toContain("invalid_input: exec input has unknown key(s)");
    expect(message).toContain(`${expected}: { "code": "return 1 + 1", "language": "javascript" }.`);
  });

  it("names no key for one that stands for nothing", () => {
    expect(codeOf(() => parseExecInput({ code: "1", colour: "red" }, both))).toBe(
      'invalid_input: exec input has unknown key(s) "colour".',
    );
  });

  it("refuses a cell over maxCodeBytes, counting UTF-8 bytes, and accepts one at the limit", () => {
    expect(parseExecInput({ code: "x".repeat(1024) }, both, 1024).code).toHaveLength(1024);
    expect(codeOf(() => parseExecInput({ code: "x".repeat(1025) }, both, 1024))).toContain(
      "invalid_input: exec code is 1025 bytes, over tools.codeMode.maxCodeBytes (1024)",
    );
    // 400 characters of three bytes each: short in UTF-16, over the limit in UTF-8.
    expect(codeOf(() => parseExecInput({ command: "€".repeat(400) }, both, 1024))).toContain("1200 bytes");
    expect(parseExecInput({ code: "x".repeat(5000) }, both).code).toHaveLength(5000);
  });

  it.each([
    ["a js fence", "```js\nreturn 1\n```", "\nreturn 1\n", "javascript"],
    [
      "a bare fence, indented, with a blank line after",
      "  ```\nconst a = 1;\nreturn a\n  ```\n\n",
      "  \nconst a = 1;\nreturn a\n",
      "javascript",
    ],
    [
      "a ts fence",
      "```ts\nconst a: number = 1;\nreturn a\n```",
      "\nconst a: number = 1;\nreturn a\n",
      "typescript",
    ],
    [
      "a typescript fence after blank lines",
      "\n\n```TypeScript \nreturn 1\n```",
      "\n\n\nreturn 1\n",
      "typescript",
    ],
    ["\\r\\n line ends", "```javascript\r\nreturn 1\r\n```\r\n", "\r\nreturn 1\r\n", "javascript"],
  ])("takes the code inside %s, every line where it was", (_name, code, inner, language) => {
    // The exact text: the fence lines are empty lines, so each line of code keeps its number.
    expect(parseExecInput({ code }, both)).toEqual({ code: inner, language });
  });

  it.each([
    ["a fence never closed", "```js\nreturn 1"],
    ["a fence that does not start the cell", "const a = 1;\n```js\nreturn a\n```"],
    ["backticks in the code itself", "return `a` + ``"],
    ["an opening fence with code on its line", "```return 1\n```"],
  ])("leaves %s as sent", (_name, code) => {
    expect(parseExecInput({ code }, both).code).toBe(code);
  });

  it("keeps the language it is given over a fence's, and a fence's TypeScript only where it is enabled", () => {
    expect(parseExecInput({ code: "```ts\nreturn 1\n```", language: "javascript" }, both).language).toBe(
      "javascript",
    );
    expect(parseExecInput({ code: "```ts\nreturn 1\n```" }, ["javascript"]).language).toBe("javascript");
  });

  it("refuses a fence with nothing inside", () => {
    expect(codeOf(() => parseExecInput({ code: "```js\n\n```" }, both))).toContain(
      'invalid_input: exec needs a non-empty "code"',
    );
  });

  it("refuses a language the config does not enable", () => {
    expect(codeOf(() => parseExecInput({ code: "1", language: "typescript" }, ["javascript"]))).toContain(
      'unsupported_language: exec language "typescript" is disabled',
    );
    expect(codeOf(() => parseExecInput({ code: "1" }, ["typescript"]))).toContain("unsupported_language");
  });

  it("has a JSON Schema for the tool definition", () => {
    expect(execInputJsonSchema).toMatchObject({
      type: "object",
      properties: {
        code: { type: "string" },
        command: { type: "string" },
        language: { enum: ["javascript", "typescript"] },
      },
      additionalProperties: false,
    });
  });
});

describe("wait input", () => {
  it("accepts a runId", () => {
    expect(parseWaitInput({ runId: "r1" })).toEqual({ runId: "r1" });
  });
  it.each([
    ["missing runId", {}],
    ["empty runId", { runId: "" }],
    ["numeric runId", { runId: 5 }],
    ["extra key", { runId: "r", code: "x" }],
    ["not an object", "r1"],
  ])("refuses %s", (_name, input) => {
    expect(codeOf(() => parseWaitInput(input))).toMatch(/^invalid_input/);
  });

  it.each([["run_id"], ["runID"], ["run-id"], ["id"]])("names runId for %s", (key) => {
    expect(codeOf(() => parseWaitInput({ [key]: "r1" }))).toBe(
      `invalid_input: wait input has unknown key(s) "${key}". Use "runId" for "${key}": { "runId": "<the runId exec returned>" }.`,
    );
  });
  it("has a JSON Schema with runId required", () => {
    expect(waitInputJsonSchema).toMatchObject({ type: "object", required: ["runId"] });
  });
});
