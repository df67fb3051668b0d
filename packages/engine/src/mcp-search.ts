import type { ToolCatalog } from "@codecell/catalog";
import type { McpDeclarations, McpServerDescription } from "@codecell/mcp-declarations";
import { renderVisibleDeclarations } from "./guest-surface.js";

/** One answer of `API.search`: how a cell calls the MCP tool, its signature on one line, what it does. */
export type McpSearchHit = {
  /** The call expression, such as `MCP.memory.createEntities`. */
  call: string;
  /** `MCP.memory.createEntities(input: { ... }): Promise<...>` on one line, shortened past 240 characters. */
  signature: string;
  description: string;
  /** The server id and the tool's own MCP name. */
  server: string;
  tool: string;
};

const MAX_SIGNATURE_CHARS = 240;
const MAX_DESCRIPTION_CHARS = 500;

function shorten(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/** The tool's `function` line from its declaration block, comments dropped, as one line. */
function signatureOf(declaration: string, identifier: string, call: string): string {
  const start = declaration.indexOf(`function ${identifier}(`);
  if (start < 0) return `${call}(input)`;
  const returns = declaration.indexOf("): Promise<", start);
  const end = returns < 0 ? -1 : declaration.indexOf(";\n", returns);
  const text = declaration
    .slice(start, end < 0 ? undefined : end)
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .replace(`function ${identifier}(`, `${call}(`);
  return shorten(text, MAX_SIGNATURE_CHARS);
}

/**
 * `API.search(query, { limit })`: the visible MCP servers' tools ranked by the catalog's own search
 * (the same index, analysis and limits as `tools.search`, restricted to MCP entries), each as the cell
 * calls it. A catalogued MCP tool whose server has no declaration in this run is left out.
 */
export function searchMcpTools(
  catalog: ToolCatalog,
  declarations: McpDeclarations,
  query: string,
  limit: number | undefined,
): McpSearchHit[] {
  const hits: McpSearchHit[] = [];
  for (const entry of catalog.search(query, { limit, sources: ["mcp"] })) {
    const server = declarations.servers.find((candidate) => candidate.name === entry.sourceName);
    const tool = server?.tools.find((candidate) => candidate.name === entry.name);
    if (!server || !tool) continue;
    const call = `MCP.${server.identifier}.${tool.identifier}`;
    hits.push({
      call,
      signature: signatureOf(tool.declaration, tool.identifier, call),
      description: shorten(entry.description.trim(), MAX_DESCRIPTION_CHARS),
      server: server.name,
      tool: tool.name,
    });
  }
  return hits;
}

/** The visible MCP servers as a cell sees them: `MCP.<server>.<tool>` call expressions, and API.search. */
export type McpCellView = {
  servers: Array<{ name: string; call: string; tools: string[] }>;
  search(query: string, options?: { limit?: number }): McpSearchHit[];
};

/**
 * For hosts (`codecell catalog`): the MCP servers a run over `catalog` would see, named the way a cell
 * calls them, and the same `API.search` a cell runs. `tools.search` and `ALL_TOOLS` never list these.
 */
export function mcpCellView(catalog: ToolCatalog, servers: readonly McpServerDescription[]): McpCellView {
  const declarations = renderVisibleDeclarations(servers, catalog);
  return {
    servers: declarations.servers.map((server) => ({
      name: server.name,
      call: `MCP.${server.identifier}`,
      tools: server.tools.map((tool) => `MCP.${server.identifier}.${tool.identifier}`),
    })),
    search: (query, options = {}) => searchMcpTools(catalog, declarations, query, options.limit),
  };
}
