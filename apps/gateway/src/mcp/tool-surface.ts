import { type CodeModeResult, codeModeResultOutputSchema, codeModeResultText } from "@codecell/contract";
import { mcpCellView } from "@codecell/engine";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { Gateway } from "../gateway.js";
import type { GatewaySession } from "../sessions/session.js";

// What a client sees of the gateway, whichever protocol era it speaks: the tools it lists, the results
// of its calls and the resources it reads. The fronts of both eras (mcp-front.ts on SDK 1.x for the
// session era, modern-front.ts on SDK v2 for 2026-07-28) build their answers from here, so the two
// cannot drift apart.

/**
 * exec and wait share one small output schema naming the result's fields, so clients get typed
 * structured content without every tools/list carrying the full result schema twice.
 */
const RESULT_OUTPUT_SCHEMA = codeModeResultOutputSchema as unknown as { type: "object" } & Record<
  string,
  unknown
>;

/** JSON-RPC error of MCP for a resource the server does not have. */
export const RESOURCE_NOT_FOUND = -32002;

/**
 * How exec and wait behave, for clients that show or gate tools by it: exec runs code that may write
 * files and call any server (not read-only, destructive, open world); wait continues such a run.
 */
const CONTROL_TOOLS: Record<string, { title: string; annotations: ToolAnnotations }> = {
  exec: {
    title: "Run a code cell",
    annotations: {
      title: "Run a code cell",
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    },
  },
  wait: {
    title: "Wait for a code cell",
    annotations: {
      title: "Wait for a code cell",
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    },
  },
};

export const SERVER_INSTRUCTIONS =
  "codecell runs JavaScript/TypeScript cells that call many tools. Use exec with code; if the result is waiting, call wait with its runId.";

export const TRAJECTORY_URI = "codecell://session/trajectory";
export const CATALOG_URI = "codecell://session/catalog";

/** What `tools/list` answers for a session: exec and wait (titled, annotated), or the passthrough tools. */
export function listedTools(session: GatewaySession) {
  const active = session.run.active;
  return {
    tools: session.modelTools().map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema as { type: "object" },
      ...(active && (tool.name === "exec" || tool.name === "wait")
        ? { ...CONTROL_TOOLS[tool.name], outputSchema: RESULT_OUTPUT_SCHEMA }
        : {}),
    })),
  };
}

/**
 * A code-mode result as an MCP tool result. The text, which the model reads, holds only what it needs
 * to go on (status, value or error and code, output, runId, reason, pending calls); the full result,
 * telemetry included, is the structured content for hosts and viewers.
 */
export function toCallToolResult(result: CodeModeResult): CallToolResult {
  // A cell's image(...) items travel as MCP image content after the text, which names them by size.
  const images = (result.output ?? []).flatMap((item) =>
    item.type === "image" ? [{ type: "image" as const, data: item.data, mimeType: item.mimeType }] : [],
  );
  return {
    content: [{ type: "text", text: codeModeResultText(result) }, ...images],
    structuredContent: result as unknown as Record<string, unknown>,
    ...(result.status === "failed" ? { isError: true } : {}),
  };
}

/** A passthrough tool's value as an MCP tool result (MCP tools' results are forwarded as they are). */
export function directResult(value: unknown, fromMcp: boolean): CallToolResult {
  if (fromMcp && value && typeof value === "object" && Array.isArray((value as CallToolResult).content)) {
    return value as CallToolResult;
  }
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? "null");
  const structured = value !== null && typeof value === "object" && !Array.isArray(value);
  return {
    content: [{ type: "text", text }],
    ...(structured ? { structuredContent: value as Record<string, unknown> } : {}),
  };
}

export function errorResult(error: unknown): CallToolResult {
  const code = (error as { code?: unknown }).code;
  const prefix = typeof code === "string" ? `${code}: ` : "";
  return {
    content: [{ type: "text", text: `${prefix}${(error as Error).message ?? String(error)}` }],
    isError: true,
  };
}

/** What `resources/list` answers: the session's trajectory and the hidden catalog. */
export function listedResources() {
  return {
    resources: [
      {
        uri: TRAJECTORY_URI,
        name: "trajectory",
        title: "Nested calls of this session",
        description: "Every exec and wait call of this MCP session with the nested tool calls made under it.",
        mimeType: "application/json",
      },
      {
        uri: CATALOG_URI,
        name: "catalog",
        title: "Hidden tool catalog",
        description: "ALL_TOOLS as a cell sees it, and the MCP servers behind MCP.<server>.",
        mimeType: "application/json",
      },
    ],
  };
}

/**
 * What `resources/templates/list` answers: none. A server with the resources capability is asked for
 * its templates too (the Inspector does, and caching clients of 2026-07-28), so it answers with an
 * empty list rather than "method not found".
 */
export function listedResourceTemplates() {
  return { resourceTemplates: [] };
}

/**
 * What `resources/read` answers for `uri`, or null for a URI this server does not have (each front
 * answers that with its SDK's error).
 */
export function readResource(gateway: Gateway, session: () => GatewaySession, uri: string) {
  let value: unknown;
  if (uri === TRAJECTORY_URI) value = session().trajectory();
  else if (uri === CATALOG_URI) value = catalogView(gateway);
  else return null;
  return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(value) }] };
}

export function unknownResourceMessage(uri: string): string {
  return `Unknown resource ${uri}; this server offers ${TRAJECTORY_URI} and ${CATALOG_URI}.`;
}

/** The catalog as a guest sees it: `ALL_TOOLS`, and per MCP server its tool names. */
export function catalogView(gateway: Gateway, query?: string) {
  const catalog = gateway.catalog();
  // MCP tools apart, the way a cell sees them: MCP.<server>.<tool>, found with API.search (never with
  // tools.search or ALL_TOOLS, which leave them out).
  const mcp = mcpCellView(catalog, gateway.connector.describeServers());
  return {
    codeMode: gateway.config.codeMode.enabled,
    ...(query === undefined
      ? { allTools: catalog.guestEntries }
      : { query, "tools.search": catalog.search(query), "API.search": mcp.search(query) }),
    mcpServers: mcp.servers,
    bySource: catalog.countsBySource,
  };
}
