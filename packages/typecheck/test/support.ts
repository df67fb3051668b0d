import { readdirSync, readFileSync } from "node:fs";
import { type McpServerDescription, renderMcpDeclarations } from "@codecell/mcp-declarations";
import type { GuestCatalogTool, GuestDeclarationInput } from "../src/guest-declarations.js";

const catalogs = new URL("../../../fixtures/mcp-catalogs/", import.meta.url);

/** The eight captured public MCP servers (97 tools) as the host describes them. */
export function capturedServers(): McpServerDescription[] {
  return readdirSync(catalogs)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => {
      const capture = JSON.parse(readFileSync(new URL(name, catalogs), "utf8"));
      return { name: capture.server, tools: capture.tools, resources: false, prompts: false };
    });
}

/** Core tools as a gateway's workspace offers them. */
export const CORE_TOOLS: GuestCatalogTool[] = [
  {
    id: "core:read_file",
    name: "read_file",
    description: "Read a UTF-8 file of the workspace.",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string" }, maxBytes: { type: "integer" } },
      required: ["path"],
      additionalProperties: false,
    },
    outputSchema: {
      type: "object",
      properties: { path: { type: "string" }, content: { type: "string" }, bytes: { type: "integer" } },
      required: ["path", "content", "bytes"],
    },
  },
  {
    id: "core:list_files",
    name: "list_files",
    description: "List the files under a directory of the workspace.",
    inputSchema: { type: "object", properties: { dir: { type: "string" } } },
  },
  {
    id: "plugin:notes:add_note",
    name: "add_note",
    description: "Add a note.",
    inputSchema: {
      type: "object",
      properties: {
        title: { type: "string" },
        body: { type: "string" },
        tags: { type: "array", items: { type: "string" } },
      },
      required: ["title", "body"],
    },
  },
];

/** A guest with the core tools, the Notes namespace and the given MCP servers. */
export function guestInput(servers: McpServerDescription[] = capturedServers()): GuestDeclarationInput {
  const mcp = renderMcpDeclarations(servers);
  return {
    tools: CORE_TOOLS,
    toolFunctions: [
      { name: "read_file", toolId: "core:read_file", aliases: ["readFile"] },
      { name: "list_files", toolId: "core:list_files", aliases: ["listFiles"] },
      { name: "add_note", toolId: "plugin:notes:add_note", aliases: ["addNote"] },
    ],
    mcp,
    mcpAliases: mcp.servers.map((server) => ({
      identifier: server.identifier,
      aliases: server.identifier === server.name ? [] : [server.name],
      tools: server.tools.map((tool) => ({ identifier: tool.identifier, aliases: [tool.name] })),
    })),
    namespaces: [
      {
        globalName: "Notes",
        scope: { list: { $codecellCall: "list" }, add: { $codecellCall: "add" }, limits: { maxNotes: 100 } },
      },
    ],
    callMarkerKey: "$codecellCall",
  };
}
