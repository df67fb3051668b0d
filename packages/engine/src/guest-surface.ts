import type { GuestSurface } from "@codecell/bridge";
import type { ToolCatalog } from "@codecell/catalog";
import {
  type McpDeclarations,
  type McpServerDescription,
  renderMcpDeclarations,
} from "@codecell/mcp-declarations";
import type { NamespaceRuntime } from "@codecell/namespaces";

/**
 * The MCP servers a run may see: each server keeps only the tools its catalog holds after policy, and a
 * server with no visible tool is left out entirely (its resources and prompts too).
 */
export function visibleMcpServers(
  servers: readonly McpServerDescription[],
  catalog: ToolCatalog,
): McpServerDescription[] {
  const visible: McpServerDescription[] = [];
  for (const server of servers) {
    const tools = server.tools.filter((tool) => catalog.get(`mcp:${server.name}:${tool.name}`));
    if (tools.length > 0) visible.push({ ...server, tools });
  }
  return visible;
}

export function renderVisibleDeclarations(
  servers: readonly McpServerDescription[],
  catalog: ToolCatalog,
): McpDeclarations {
  return renderMcpDeclarations(visibleMcpServers(servers, catalog));
}

/** The JSON the sandbox prelude turns into the guest globals of one run. */
export function buildGuestSurface(
  catalog: ToolCatalog,
  declarations: McpDeclarations,
  namespaces: NamespaceRuntime,
): GuestSurface {
  return {
    allTools: [...catalog.guestEntries],
    toolFunctions: [...catalog.convenienceNames],
    mcpServers: declarations.servers.map((server) => ({
      identifier: server.identifier,
      tools: server.tools.map((tool) => ({
        identifier: tool.identifier,
        toolId: `mcp:${server.name}:${tool.name}`,
      })),
      resources: server.resources,
      prompts: server.prompts,
    })),
    apiFiles: declarations.files.map(({ path, description, content }) => ({ path, description, content })),
    namespaces: namespaces.namespaces.map(({ namespaceId, globalName, scope }) => ({
      namespaceId,
      globalName,
      scope,
    })),
  };
}
