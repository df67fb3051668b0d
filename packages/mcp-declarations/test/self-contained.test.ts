import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { renderApiHeader } from "../src/api-header.js";
import { renderMcpDeclarations } from "../src/render-declarations.js";
import type { McpServerDescription } from "../src/types.js";
import { compileDeclarations } from "./support/compile-declarations.js";

// Spec: `mcp/<server>.d.ts` and `$api()` are self-contained: `McpToolResult` and
// anything else they use are defined where they are used, so each file type-checks alone.

const catalogDir = resolve(dirname(fileURLToPath(import.meta.url)), "../../../fixtures/mcp-catalogs");

function loadCatalogs(): McpServerDescription[] {
  return readdirSync(catalogDir)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => {
      const catalog = JSON.parse(readFileSync(join(catalogDir, name), "utf8"));
      const everything = catalog.server === "everything";
      return { name: catalog.server, tools: catalog.tools, resources: everything, prompts: everything };
    });
}

/**
 * Each text as its own module (`export {}` keeps its declarations out of the global scope), all in one
 * compiler run: a name a text uses but does not declare is an error in that text alone.
 */
function compileEachAlone(texts: Array<{ path: string; content: string }>): string[] {
  return compileDeclarations(
    texts.map((text) => ({ path: text.path, content: `${text.content}\nexport {};\n` })),
  );
}

describe.skipIf(!existsSync(catalogDir))("declaration texts of the eight captured servers", () => {
  const declarations = existsSync(catalogDir)
    ? renderMcpDeclarations(loadCatalogs())
    : { files: [], servers: [] };

  it("every mcp/<server>.d.ts and mcp/index.d.ts type-checks alone, with no reference to another file", () => {
    expect(declarations.files).toHaveLength(9);
    for (const file of declarations.files) expect(file.content).not.toContain("/// <reference");
    expect(compileEachAlone(declarations.files)).toEqual([]);
  });

  it("every $api() and $api(tool) text type-checks alone", () => {
    const texts = declarations.servers.flatMap((server) => [
      { path: `api/${server.identifier}.d.ts`, content: renderApiHeader(server) },
      ...server.tools.map((tool) => ({
        path: `api/${server.identifier}/${tool.identifier}.d.ts`,
        content: renderApiHeader(server, tool.name),
      })),
    ]);
    expect(texts).toHaveLength(8 + 97);
    expect(compileEachAlone(texts)).toEqual([]);
  });

  it("a cell's code checks against one server file alone, with its result types", () => {
    const memory = declarations.files.find((file) => file.path === "mcp/memory.d.ts")!;
    const usage = {
      path: "cell.ts",
      content: `
async function cell() {
  const graph = await MCP.memory.readGraph();
  const first: MCP.memory.McpContent | undefined = graph.content?.[0];
  return { names: (graph.structuredContent?.entities ?? []).map((entity) => entity.name), first };
}
export { cell };
`,
    };
    expect(compileDeclarations([memory, usage])).toEqual([]);
  });
});

describe("shared result types in a server file", () => {
  it("declares only the ones the file uses", () => {
    const [plain] = renderMcpDeclarations([
      {
        name: "plain",
        tools: [{ name: "ping", inputSchema: { type: "object" } }],
        resources: false,
        prompts: false,
      },
    ]).servers;
    expect(plain!.header).toContain("type McpToolResult = {");
    expect(plain!.header).not.toContain("McpToolResultOf");
    expect(plain!.header).not.toContain("McpResourceList");
    const [full] = renderMcpDeclarations([
      {
        name: "full",
        tools: [{ name: "get", inputSchema: { type: "object" }, outputSchema: { type: "object" } }],
        resources: true,
        prompts: true,
      },
    ]).servers;
    for (const name of [
      "McpToolResultOf<T>",
      "McpResourceList",
      "McpResourceContents",
      "McpPromptList",
      "McpPromptResult",
    ])
      expect(full!.header).toContain(`type ${name} =`);
  });
});
