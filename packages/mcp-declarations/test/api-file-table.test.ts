import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { createApiFileTable } from "../src/api-file-table.js";
import { renderMcpDeclarations } from "../src/render-declarations.js";

const declarations = renderMcpDeclarations([
  {
    name: "github",
    tools: [{ name: "create_issue", inputSchema: { type: "object", properties: {} } }],
    resources: false,
    prompts: false,
  },
  { name: "docs", title: "Docs ✓", tools: [], resources: true, prompts: true },
]);
const table = createApiFileTable(declarations.files);

describe("API.list", () => {
  const all = ["mcp/docs.d.ts", "mcp/github.d.ts", "mcp/index.d.ts"];
  const cases: Array<[string | undefined, string[]]> = [
    [undefined, all],
    ["", all],
    ["mcp", all],
    ["mcp/", all],
    ["mcp/github.d.ts", ["mcp/github.d.ts"]],
  ];
  it.each(cases)("list(%j)", (prefix, paths) => {
    expect(table.list(prefix).map((file) => file.path)).toEqual(paths);
  });

  it("gives descriptions and UTF-8 byte sizes", () => {
    const docs = table.list("mcp/docs.d.ts")[0]!;
    expect(docs.description).toBe("MCP.docs (Docs ✓): 0 tools, resources, prompts.");
    expect(docs.bytes).toBe(Buffer.byteLength(table.read("mcp/docs.d.ts")));
    expect(docs.bytes).toBeGreaterThan(table.read("mcp/docs.d.ts").length);
  });
});

describe("refusals", () => {
  const cases: Array<["list" | "read", unknown, RegExp]> = [
    ["read", "mcp/../secrets", /"\." and "\.\." segments are not allowed/],
    ["read", "./mcp/index.d.ts", /"\." and "\.\." segments/],
    ["list", "mcp/..", /"\." and "\.\." segments/],
    ["list", "..", /"\." and "\.\." segments/],
    ["read", "/mcp/index.d.ts", /drop the leading "\/"/],
    ["read", "mcp\\index.d.ts", /use "\/"/],
    ["read", "mcp//index.d.ts", /segment is empty/],
    ["read", "mcp/githb.d.ts", /no API file at that path\. Did you mean "mcp\/github\.d\.ts"\?/],
    ["read", "mcp", /is a directory; API\.list\("mcp"\)/],
    ["read", "", /segment is empty/],
    ["list", "mpc", /no API file or directory at that path\. Did you mean "mcp"\?/],
    ["list", "tools", /no API file or directory/],
    ["read", 42, /takes a path string; got a number/],
    ["list", null, /takes a path string; got null/],
  ];
  it.each(cases)("%s(%j)", (operation, path, message) => {
    const call = () => (operation === "list" ? table.list(path as string) : table.read(path as string));
    expect(call).toThrow(message);
    try {
      call();
    } catch (error) {
      expect(CodeModeError.is(error) && error.code).toBe("invalid_input");
    }
  });
});

it("always has mcp/index.d.ts, so list('mcp') works without servers", () => {
  const empty = createApiFileTable(renderMcpDeclarations([]).files);
  expect(empty.list("mcp").map((file) => file.path)).toEqual(["mcp/index.d.ts"]);
  expect(empty.read("mcp/index.d.ts")).toContain("No MCP server is visible");
});
