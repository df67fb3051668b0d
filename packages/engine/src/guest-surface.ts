import type { GuestSurface } from "@codecell/bridge";
import { aliasNamesFor, type ToolCatalog } from "@codecell/catalog";
import { OBJECT_BEHAVIOUR_NAMES } from "@codecell/contract";
import {
  type McpDeclarations,
  type McpServerDescription,
  RESERVED_TOOL_IDENTIFIERS,
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
  const serverAliases = aliasNamesFor(
    declarations.servers.map((server) => ({ name: server.identifier, originalNames: [server.name] })),
    OBJECT_BEHAVIOUR_NAMES,
  );
  return {
    allTools: [...catalog.guestEntries],
    toolFunctions: [...catalog.convenienceNames],
    mcpServers: declarations.servers.map((server) => {
      // MCP.<server> answers to each tool's name as the server's own docs spell it, and its variants.
      const toolAliases = aliasNamesFor(
        server.tools.map((tool) => ({ name: tool.identifier, originalNames: [tool.name] })),
        [...RESERVED_TOOL_IDENTIFIERS, ...OBJECT_BEHAVIOUR_NAMES],
      );
      const aliases = serverAliases.get(server.identifier);
      return {
        identifier: server.identifier,
        ...(aliases ? { aliases } : {}),
        tools: server.tools.map((tool) => {
          const names = toolAliases.get(tool.identifier);
          return {
            identifier: tool.identifier,
            toolId: `mcp:${server.name}:${tool.name}`,
            ...(names ? { aliases: names } : {}),
          };
        }),
        resources: server.resources,
        prompts: server.prompts,
      };
    }),
    // The text stays on the host: API.read asks for it (see the "api" request in nested-calls.ts).
    apiFiles: declarations.files.map(({ path, description, content }) => ({
      path,
      description,
      bytes: Buffer.byteLength(content, "utf8"),
    })),
    apiShortPaths: shortApiPaths(declarations.files.map((file) => file.path)),
    namespaces: namespaces.namespaces.map(({ namespaceId, globalName, scope }) => ({
      namespaceId,
      globalName,
      scope,
    })),
  };
}

/**
 * What a model writes for an API path it half remembers: without `mcp/`, without `.d.ts`, or the bare
 * file name. Each spelling maps to every path it could mean; the prelude serves it only when that is one.
 */
export function shortApiPaths(paths: readonly string[]): Record<string, string[]> {
  const short: Record<string, string[]> = Object.create(null);
  for (const path of paths) {
    const name = path.slice(path.lastIndexOf("/") + 1);
    const spellings = new Set([
      path.replace(/^mcp\//, ""),
      path.replace(/\.d\.ts$/, ""),
      path.replace(/^mcp\//, "").replace(/\.d\.ts$/, ""),
      name,
      name.replace(/\.d\.ts$/, ""),
    ]);
    spellings.delete(path);
    for (const spelling of spellings) {
      const meanings = short[spelling] ?? [];
      meanings.push(path);
      short[spelling] = meanings;
    }
  }
  return short;
}
