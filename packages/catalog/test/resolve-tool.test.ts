import { describe, expect, it } from "vitest";
import { buildToolCatalog } from "../src/build-tool-catalog.js";
import { expectCodeModeError, hostTool } from "./support/tools.js";

const outputSchema = { type: "object", properties: { ok: { type: "boolean" } } };
const catalog = buildToolCatalog([
  hostTool("core", "host", "read_file"),
  hostTool("plugin", "files", "read_file"),
  hostTool("core", "host", "write_file"),
  hostTool("core", "host", "web_search", { label: "Web search" }),
  hostTool("client", "app", "select_file", { outputSchema }),
  hostTool("mcp", "github", "create_issue"),
  hostTool("mcp", "github", "list_issues"),
]);

describe("describe and resolve", () => {
  it.each([
    ["an exact id", "core:host:write_file", "core:host:write_file"],
    ["a unique name", "write_file", "core:host:write_file"],
    ["an id whose name is ambiguous", "plugin:files:read_file", "plugin:files:read_file"],
  ])("resolve %s", (_case, idOrName, expected) => {
    expect(catalog.resolve(idOrName).id).toBe(expected);
    expect(catalog.describe(idOrName).id).toBe(expected);
  });

  it("describe adds the input schema, and the output schema when the tool declares one", () => {
    expect(catalog.describe("core:host:web_search")).toEqual({
      id: "core:host:web_search",
      name: "web_search",
      label: "Web search",
      description: "web search tool",
      source: "core",
      sourceName: "host",
      parameters: { type: "object", properties: { value: { type: "string" } } },
    });
    expect(catalog.describe("select_file").outputSchema).toEqual(outputSchema);
  });

  it("lists the candidate ids of an ambiguous name", () => {
    const error = expectCodeModeError(
      () => catalog.describe("read_file"),
      "invalid_input",
      '"core:host:read_file"',
      '"plugin:files:read_file"',
      "ambiguous",
    );
    expect(error.details).toEqual({
      tool: "read_file",
      candidates: ["core:host:read_file", "plugin:files:read_file"],
    });
  });

  it.each([
    ["a misspelt name", "web_serch", ["web_search"]],
    ["a misspelt id", "core:host:writefile", ["core:host:write_file", "core:host:read_file"]],
    ["a name far from everything", "quantum_teleport", []],
  ])("answers %s with at most three suggestions", (_case, idOrName, suggestions) => {
    const error = expectCodeModeError(
      () => catalog.resolve(idOrName),
      "invalid_input",
      `Unknown tool "${idOrName}"`,
    );
    expect(error.details?.["suggestions"]).toEqual(suggestions);
    expect((error.details?.["suggestions"] as string[] | undefined)?.length ?? 0).toBeLessThanOrEqual(3);
    if (suggestions.length === 0) expect(error.message).toContain("tools.search");
  });

  it("never suggests more than three", () => {
    const many = buildToolCatalog(
      ["tool_a", "tool_b", "tool_c", "tool_d", "tool_e"].map((name) => hostTool("core", "h", name)),
    );
    const error = expectCodeModeError(() => many.resolve("tool_"), "invalid_input", "Did you mean");
    expect(error.details?.["suggestions"]).toHaveLength(3);
  });

  it("keeps MCP tools out of the guest view and points at the MCP namespace", () => {
    expectCodeModeError(
      () => catalog.describe("mcp:github:create_issue"),
      "invalid_input",
      "MCP.<server>.<tool>",
    );
    expectCodeModeError(() => catalog.resolve("create_issue"), "invalid_input", "Unknown tool");
    expect(catalog.resolve("create_issue", { includeMcp: true }).id).toBe("mcp:github:create_issue");
    expect(catalog.describe("mcp:github:list_issues", { includeMcp: true }).name).toBe("list_issues");
  });

  it.each([
    ["an empty string", ""],
    ["a number", 7],
    ["an object", { id: "core:host:read_file" }],
  ])("rejects %s as an id", (_case, value) => {
    expectCodeModeError(() => catalog.describe(value as string), "invalid_input", "expects a tool id");
  });

  it("get looks up exact ids over every source, and nothing else", () => {
    expect(catalog.get("mcp:github:create_issue")?.tool.name).toBe("create_issue");
    expect(catalog.get("create_issue")).toBeUndefined();
  });
});
