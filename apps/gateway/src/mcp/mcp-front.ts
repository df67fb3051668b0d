import {
  type CodeModeResult,
  codeModeResultOutputSchema,
  codeModeResultText,
  type JsonValue,
} from "@codecell/contract";
import { mcpCellView } from "@codecell/engine";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type RequestId,
  type ServerNotification,
  type ServerRequest,
  SetLevelRequestSchema,
  type ToolAnnotations,
} from "@modelcontextprotocol/sdk/types.js";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { debugLine, debugSwitches, redact } from "../debug-switches.js";
import type { Gateway } from "../gateway.js";
import type { RunOwner } from "../sessions/run-owner.js";
import type { GatewaySession } from "../sessions/session.js";
import { mcpRequest } from "../telemetry/request-tracing.js";
import { GATEWAY_VERSION } from "../version.js";
import type { ApprovalClient } from "./approvals.js";
import { CallProgress, ClientLog, cellOutputMessages, loggingLevelOf } from "./call-feedback.js";

/**
 * exec and wait share one small output schema naming the result's fields, so clients get typed
 * structured content without every tools/list carrying the full result schema twice.
 */
const RESULT_OUTPUT_SCHEMA = codeModeResultOutputSchema as unknown as { type: "object" } & Record<
  string,
  unknown
>;

/** JSON-RPC error of MCP for a resource the server does not have. */
const RESOURCE_NOT_FOUND = -32002;

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

const TRAJECTORY_URI = "codecell://session/trajectory";
const CATALOG_URI = "codecell://session/catalog";

/**
 * A code-mode result as an MCP tool result. The text, which the model reads, holds only what it needs
 * to go on (status, value or error and code, output, runId, reason, pending calls); the full result,
 * telemetry included, is the structured content for hosts and viewers.
 */
export function toCallToolResult(result: CodeModeResult): CallToolResult {
  return {
    content: [{ type: "text", text: codeModeResultText(result) }],
    structuredContent: result as unknown as Record<string, unknown>,
    ...(result.status === "failed" ? { isError: true } : {}),
  };
}

/** A passthrough tool's value as an MCP tool result (MCP tools' results are forwarded as they are). */
function directResult(value: unknown, fromMcp: boolean): CallToolResult {
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

function errorResult(error: unknown): CallToolResult {
  const code = (error as { code?: unknown }).code;
  const prefix = typeof code === "string" ? `${code}: ` : "";
  return {
    content: [{ type: "text", text: `${prefix}${(error as Error).message ?? String(error)}` }],
    isError: true,
  };
}

/** The SDK's Ajv-based validator, imported when the first approval is asked for (see createSessionServer). */
let ajvValidatorClass: typeof AjvJsonSchemaValidator | undefined;
async function loadAjvValidator(): Promise<void> {
  ajvValidatorClass ??= (await import("@modelcontextprotocol/sdk/validation/ajv")).AjvJsonSchemaValidator;
}
/**
 * One MCP server object for one client session. It answers tools/list with exec and wait (or the
 * passthrough tools when code mode is off), routes tools/call, and offers the session's trajectory and
 * catalog as resources for viewers such as the playground.
 */
export function createSessionServer(
  gateway: Gateway,
  sessionIdOf: () => string,
  ownerOf?: () => RunOwner,
): {
  server: Server;
  approvals: ApprovalClient;
  session: () => GatewaySession;
  /** The session if one was opened yet, without opening it. */
  peekSession: () => GatewaySession | null;
} {
  // The SDK would build an Ajv instance with all its formats for every server object, on the way to the
  // first tools/list; it only checks elicitation answers (approvals), so it is built when one comes.
  // Ajv itself is imported then too: in the CLI's bundle, its modules are not even evaluated before.
  let ajv: AjvJsonSchemaValidator | undefined;
  const jsonSchemaValidator: jsonSchemaValidator = {
    getValidator: (schema) => {
      if (ajvValidatorClass === undefined) {
        throw new Error("the JSON Schema validator is used before an approval loaded it (see askApproval)");
      }
      ajv ??= new ajvValidatorClass();
      return ajv.getValidator(schema);
    },
  };
  const server = new Server(
    { name: "codecell", version: GATEWAY_VERSION },
    {
      jsonSchemaValidator,
      capabilities: { tools: { listChanged: true }, resources: {}, logging: {} },
      instructions:
        "codecell runs JavaScript/TypeScript cells that call many tools. Use exec with code; if the result is waiting, call wait with its runId.",
    },
  );
  const inFlight: RequestId[] = [];
  const approvals: ApprovalClient = {
    canElicit: () => Boolean(server.getClientCapabilities()?.elicitation?.form),
    async askApproval(message, signal) {
      const related = inFlight.at(-1);
      await loadAjvValidator();
      const answer = await server.elicitInput(
        {
          mode: "form",
          message,
          requestedSchema: {
            type: "object",
            properties: { approve: { type: "boolean", title: "Approve this call", default: false } },
            required: ["approve"],
          },
        },
        { signal, ...(related !== undefined ? { relatedRequestId: related } : {}) },
      );
      return answer.action === "accept" && answer.content?.approve === true;
    },
  };
  // A downstream change alters the passthrough list, or the exec description (its MCP servers).
  const unsubscribe = gateway.onToolsChanged(() => {
    // A client that went away cannot be told; one still connected lists the tools again anyway.
    if (server.transport) void server.sendToolListChanged().catch(() => {});
  });
  const log = new ClientLog();
  const toSession = (notification: Parameters<Server["notification"]>[0]) =>
    server.transport ? server.notification(notification) : Promise.resolve();
  // Downstream servers' own log messages, under a logger per server.
  const unsubscribeLogs = gateway.connector.onLog((message) => {
    const logger = `mcp.${message.server}${message.logger ? `.${message.logger}` : ""}`;
    log.log(toSession, loggingLevelOf(message.level), logger, message.data);
  });
  server.onclose = () => {
    unsubscribe();
    unsubscribeLogs();
  };
  server.setRequestHandler(SetLevelRequestSchema, (request) => {
    log.setLevel(request.params.level);
    return {};
  });
  let session: GatewaySession | null = null;
  const current = () => {
    session ??= gateway.openSession(sessionIdOf(), approvals, ownerOf?.());
    return session;
  };

  server.setRequestHandler(ListToolsRequestSchema, () => {
    const listed = listTools();
    if (debugSwitches().payload) {
      // The whole list, uncut: what the model is shown is the point of this switch.
      debugLine("payload", `session ${sessionIdOf()} tools/list ${JSON.stringify(listed)}`, Infinity, {
        session: sessionIdOf(),
      });
    }
    return listed;
  });

  const listTools = () => {
    const active = current().run.active;
    return {
      tools: current()
        .modelTools()
        .map((tool) => ({
          name: tool.name,
          description: tool.description,
          inputSchema: tool.inputSchema as { type: "object" },
          ...(active && (tool.name === "exec" || tool.name === "wait")
            ? { ...CONTROL_TOOLS[tool.name], outputSchema: RESULT_OUTPUT_SCHEMA }
            : {}),
        })),
    };
  };

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    // Traced, the call is a server span in the client's trace (its traceparent), over the engine's.
    const result = gateway.traceRequest
      ? await gateway.traceRequest(
          mcpRequest({
            method: "tools/call",
            target: request.params.name,
            requestId: extra.requestId,
            sessionId: sessionIdOf(),
            transport: extra.requestInfo ? "http" : "stdio",
            ...(request.params._meta ? { meta: request.params._meta as Record<string, unknown> } : {}),
            ...(extra.requestInfo?.headers ? { headers: extra.requestInfo.headers } : {}),
          }),
          async (span) => {
            const answer = await callTool(request, extra);
            if (answer.isError === true) span.fail("tool_error");
            return answer;
          },
        )
      : await callTool(request, extra);
    if (debugSwitches().payload === "full-redacted") {
      // The run the line is about: the one a waiting result names, or the one a wait asked for.
      const runId =
        (result.structuredContent as { runId?: unknown } | undefined)?.runId ??
        (request.params.arguments as { runId?: unknown } | undefined)?.runId;
      debugLine(
        "payload",
        `session ${sessionIdOf()} ${request.params.name} result ${JSON.stringify(redact(result))}`,
        undefined,
        { session: sessionIdOf(), ...(typeof runId === "string" ? { runId } : {}) },
      );
    }
    return result;
  });

  const callTool = async (
    request: CallToolRequest,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ): Promise<CallToolResult> => {
    const { name, arguments: input = {} } = request.params;
    const session = current();
    inFlight.push(extra.requestId);
    try {
      // Progress and run events go on this request's own stream, so they arrive before its result.
      const send = extra.sendNotification;
      const token = request.params._meta?.progressToken;
      const progress = token !== undefined ? new CallProgress(token, send) : null;
      try {
        if (session.run.active && (name === "exec" || name === "wait")) {
          log.log(send, "debug", "codecell.run", { event: `${name} started`, requestId: extra.requestId });
          // The request's signal aborts on notifications/cancelled or when an HTTP client goes away.
          const result =
            name === "exec"
              ? await session.exec(input, {
                  signal: extra.signal,
                  ...(progress ? { onProgress: progress.onProgress } : {}),
                })
              : await session.wait(input, {
                  signal: extra.signal,
                  ...(progress ? { onProgress: progress.onProgress } : {}),
                });
          // Cell output as log messages, before the result on the same stream (when the config asks).
          if (gateway.config.logCellOutput) {
            for (const message of cellOutputMessages(result.output ?? [])) {
              log.log(send, message.level, message.logger, message.data);
            }
          }
          log.log(send, result.status === "failed" ? "warning" : "info", "codecell.run", {
            event: `${name} ${result.status}`,
            ...(result.status === "waiting" ? { runId: result.runId } : {}),
            ...(result.status === "failed" ? { code: result.code, error: result.error } : {}),
            nestedCalls: result.telemetry.nested.calls,
            durationMs: result.telemetry.durationMs,
          });
          return toCallToolResult(result);
        }
        try {
          const { tool, value } = await session.callDirect(
            name,
            input as JsonValue,
            extra.signal,
            progress
              ? (update) => progress.onProgress({ kind: "tool", toolId: name, callId: "direct", ...update })
              : undefined,
          );
          return directResult(value, tool.source === "mcp");
        } catch (error) {
          return errorResult(error);
        }
      } finally {
        progress?.stop();
      }
    } finally {
      const index = inFlight.indexOf(extra.requestId);
      if (index >= 0) inFlight.splice(index, 1);
    }
  };

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
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
  }));

  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    const { uri } = request.params;
    let value: unknown;
    if (uri === TRAJECTORY_URI) value = current().trajectory();
    else if (uri === CATALOG_URI) value = catalogView(gateway);
    else {
      throw new McpError(
        RESOURCE_NOT_FOUND,
        `Unknown resource ${uri}; this server offers ${TRAJECTORY_URI} and ${CATALOG_URI}.`,
        { uri },
      );
    }
    return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(value) }] };
  });

  return { server, approvals, session: current, peekSession: () => session };
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
