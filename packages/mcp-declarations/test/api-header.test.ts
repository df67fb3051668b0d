import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { renderApiHeader } from "../src/api-header.js";
import { renderMcpDeclarations } from "../src/render-declarations.js";

const schema = {
  type: "object",
  properties: {
    owner: { type: "string", description: "Repository owner" },
    address: { $ref: "#/$defs/Address" },
  },
  required: ["owner"],
  $defs: { Address: { type: "object", properties: { city: { type: "string" } } } },
};
const [server] = renderMcpDeclarations([
  {
    name: "github",
    tools: [
      { name: "create_issue", description: "Create an issue.", inputSchema: schema },
      {
        name: "get_me",
        inputSchema: { type: "object" },
        outputSchema: { type: "object", properties: { login: { type: "string" } } },
      },
    ],
    resources: false,
    prompts: false,
  },
]).servers;

describe("renderApiHeader", () => {
  it("returns the server's declaration file without a tool name", () => {
    expect(renderApiHeader(server!)).toBe(server!.header);
    expect(server!.header).toContain("declare namespace MCP.github {");
  });

  it("returns one tool with the named types it uses, by MCP name or identifier", () => {
    const byName = renderApiHeader(server!, "create_issue");
    expect(renderApiHeader(server!, "createIssue")).toBe(byName);
    expect(byName).toBe(
      [
        "// MCP.github.createIssue",
        "declare namespace MCP.github {",
        "  /**",
        "   * Create an issue.",
        '   * MCP tool "create_issue".',
        "   * @param owner Repository owner",
        "   */",
        "  function createIssue(input: { owner: string; address?: Address }): Promise<McpToolResult>;",
        "  type Address = { city?: string };",
        "",
        "  // MCP result types (the same as in mcp/index.d.ts), so this text stands alone.",
        "  type McpToolResult = {",
        "    /** Text, images, audio, resource links and embedded resources, in order. */",
        "    content?: McpContent[];",
        "    /** The typed result of a tool that declares an output schema. */",
        "    structuredContent?: unknown;",
        "    /** True when the tool reported a failure (the reason is in `content`); such a result is returned, not thrown. */",
        "    isError?: boolean;",
        "    [key: string]: unknown;",
        "  };",
        "  type McpContent =",
        '    | { type: "text"; text: string; annotations?: McpAnnotations; [key: string]: unknown }',
        '    | { type: "image" | "audio"; data: string; mimeType: string; annotations?: McpAnnotations; [key: string]: unknown }',
        "    | {",
        '        type: "resource_link";',
        "        uri: string;",
        "        name: string;",
        "        description?: string;",
        "        mimeType?: string;",
        "        annotations?: McpAnnotations;",
        "        [key: string]: unknown;",
        "      }",
        '    | { type: "resource"; resource: McpResourceContent; annotations?: McpAnnotations; [key: string]: unknown };',
        '  type McpAnnotations = { audience?: Array<"user" | "assistant">; priority?: number; lastModified?: string };',
        "  type McpResourceContent = { uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown };",
        "}",
        "",
      ].join("\n"),
    );
    expect(renderApiHeader(server!, "get_me")).not.toContain("Address");
  });

  it("appends the JSON Schemas on request", () => {
    const text = renderApiHeader(server!, "get_me", { schema: true });
    expect(text).toContain('// JSON Schema of "get_me" input:\n{\n  "type": "object"\n}');
    expect(text).toContain('// JSON Schema of "get_me" output:');
    expect(renderApiHeader(server!, undefined, { schema: true })).toContain(
      '// JSON Schema of "create_issue" input:',
    );
  });

  it("refuses an unknown tool with invalid_input and a suggestion", () => {
    try {
      renderApiHeader(server!, "create_isue");
      expect.unreachable();
    } catch (error) {
      expect(CodeModeError.is(error) && error.code).toBe("invalid_input");
      expect((error as Error).message).toBe(
        'MCP.github has no tool "create_isue". Did you mean "create_issue" or "createIssue"? Its tools: createIssue, getMe.',
      );
    }
  });
});
