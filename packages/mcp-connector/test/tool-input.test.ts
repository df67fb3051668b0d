import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { validateServerConfig } from "../src/config.js";
import { prepareToolInput } from "../src/tool-input.js";

const schema = {
  type: "object",
  properties: {
    query: { type: "string", description: "What to look for" },
    limit: { type: "integer", default: 10 },
    filters: { type: "object", default: { archived: false } },
  },
  required: ["query"],
};

describe("prepareToolInput", () => {
  const accepted: Array<[string, unknown, unknown]> = [
    ["fills defaults", { query: "q" }, { query: "q", limit: 10, filters: { archived: false } }],
    ["keeps given values", { query: "q", limit: 1 }, { query: "q", limit: 1, filters: { archived: false } }],
    [
      "keeps unknown keys",
      { query: "q", extra: true },
      { query: "q", extra: true, limit: 10, filters: { archived: false } },
    ],
  ];
  it.each(accepted)("%s", (_label, input, expected) => {
    expect(prepareToolInput("s.t", schema, input)).toEqual(expected);
  });

  it("copies defaults so a call cannot change the schema", () => {
    const first = prepareToolInput("s.t", schema, { query: "q" }) as { filters: { archived: boolean } };
    first.filters.archived = true;
    expect(schema.properties.filters.default).toEqual({ archived: false });
  });

  it("treats no input as an empty object", () => {
    expect(prepareToolInput("s.t", { type: "object" }, undefined)).toEqual({});
  });

  const refused: Array<[string, unknown, RegExp]> = [
    ["missing key", { limit: 1 }, /s\.t is missing the required key "query" \(What to look for\)/],
    ["undefined", undefined, /missing the required key "query"/],
    ["a string", "q", /takes one object argument, like s\.t\(\{ \.\.\. \}\); got a string/],
    ["null", null, /got null/],
    ["an array", [], /got an array/],
  ];
  it.each(refused)("refuses %s", (_label, input, message) => {
    expect(() => prepareToolInput("s.t", schema, input)).toThrow(message);
    try {
      prepareToolInput("s.t", schema, input);
    } catch (error) {
      expect(CodeModeError.is(error) && error.code).toBe("invalid_input");
    }
  });
});

describe("validateServerConfig", () => {
  const refused: Array<[unknown, RegExp]> = [
    [null, /expected an object/],
    [{}, /expected "command" \(a stdio server\) or "url"/],
    [{ command: " " }, /"command" is empty/],
    [{ command: "x", args: "a b" }, /"args" must be an array of strings/],
    [{ command: "x", env: { A: 1 } }, /"env" must map names to string values/],
    [{ url: "not a url" }, /not a valid URL/],
    [{ url: "ftp://x" }, /must be http or https/],
    [{ url: "http://x", transport: "ws" }, /"transport" is "streamable-http" or "sse"/],
  ];
  it.each(refused)("refuses %j", (config, message) => {
    expect(() => validateServerConfig("s", config)).toThrow(message);
    try {
      validateServerConfig("s", config);
    } catch (error) {
      expect(CodeModeError.is(error) && error.code).toBe("invalid_config");
    }
  });

  it("accepts the mcpServers shapes", () => {
    expect(
      validateServerConfig("a", { command: "node", args: ["s.js"], env: { K: "v" }, cwd: "/" }),
    ).toBeTruthy();
    expect(
      validateServerConfig("b", { url: "https://example.com/mcp", headers: { authorization: "x" } }),
    ).toBeTruthy();
  });
});
