import type { JsonValue } from "@codecell/contract";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type RequestId,
  type ServerNotification,
  type ServerRequest,
  SetLevelRequestSchema,
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
import {
  directResult,
  errorResult,
  listedResources,
  listedResourceTemplates,
  listedTools,
  RESOURCE_NOT_FOUND,
  readResource,
  SERVER_INSTRUCTIONS,
  toCallToolResult,
  unknownResourceMessage,
} from "./tool-surface.js";

export { catalogView, toCallToolResult } from "./tool-surface.js";

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
      instructions: SERVER_INSTRUCTIONS,
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

  const listTools = () => listedTools(current());

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

  server.setRequestHandler(ListResourcesRequestSchema, () => listedResources());
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => listedResourceTemplates());

  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    const { uri } = request.params;
    const answer = readResource(gateway, current, uri);
    if (!answer) throw new McpError(RESOURCE_NOT_FOUND, unknownResourceMessage(uri), { uri });
    return answer;
  });

  return { server, approvals, session: current, peekSession: () => session };
}
