import { randomUUID } from "node:crypto";
import type { CodeModeResult, JsonValue } from "@codecell/contract";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  type InputRequiredResult,
  inputRequired,
  inputResponse,
  ProtocolError,
  Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { debugLine, debugSwitches } from "../debug-switches.js";
import type { Gateway } from "../gateway.js";
import { ownerContext, type RunOwner } from "../sessions/run-owner.js";
import type { GatewaySession } from "../sessions/session.js";
import type { ToolCallRequest } from "../sessions/session-host.js";
import { mcpRequest } from "../telemetry/request-tracing.js";
import { GATEWAY_VERSION } from "../version.js";
import type { ApprovalClient } from "./approvals.js";
import { CallProgress } from "./call-feedback.js";
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

/** Where a 2026-07-28 request came from: whose runs it may start and wait on, and over what. */
export type ModernScope = {
  owner: RunOwner;
  transport: "http" | "stdio";
  /** The HTTP request's headers, for tracing (a `traceparent` header). */
  headers?: Record<string, string | string[] | undefined>;
};

/** The prefix of the `requestState` of an input-required result that asks for approvals. */
const APPROVAL_STATE = "codecell-approvals:";

const CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities";

/** The form an approval asks for: one yes-or-no field. */
const APPROVE_SCHEMA = {
  type: "object" as const,
  properties: { approve: { type: "boolean" as const, title: "Approve this call", default: false } },
  required: ["approve"],
};

/**
 * One SDK v2 server object for the 2026-07-28 protocol: no handshake and no MCP session, so it serves
 * one HTTP request (or one stdio connection) and is closed after. The runs it starts belong to the
 * scope's owner (the principal and, if the client named one, its scope), so any later request of the
 * same owner may wait on them. What it lists and answers comes from tool-surface.ts, as for the
 * session era; cell output is in the result, and progress goes out on the request's own stream.
 */
export function createModernServer(gateway: Gateway, scope: ModernScope): Server {
  const server = new Server(
    { name: "codecell", version: GATEWAY_VERSION },
    {
      capabilities: { tools: { listChanged: true }, resources: {} },
      instructions: SERVER_INSTRUCTIONS,
    },
  );
  // A session object of the gateway for this exchange only: its id names its calls in the trajectory.
  const sessionId = `${scope.transport}-${randomUUID()}`;
  const ownerKey = ownerContext(scope.owner).sessionId;
  const deferred = gateway.deferredApprovals;
  // Whether the request being served declared elicitation (each request carries its capabilities).
  let canElicit = false;
  const approvals: ApprovalClient = {
    canElicit: () => canElicit,
    cannotAsk:
      "this MCP 2026-07-28 client cannot be asked: its requests do not declare the elicitation capability",
    askApproval: async () => false,
    defer: (approval) => deferred.add({ ...approval, owner: ownerKey }),
  };
  let session: GatewaySession | null = null;
  const current = () => {
    session ??= gateway.openSession(sessionId, approvals, { ...scope.owner, stateless: true });
    return session;
  };

  /**
   * The client's retry brought its answers: each approved call runs now and each declined one fails in
   * the cell, both settled into the suspended run, which `wait` then resumes (the cell never runs again).
   */
  const answerApprovals = async (runId: string, ctx: ServerContext): Promise<void> => {
    for (const approval of deferred.pending(runId, ownerKey)) {
      const answer = inputResponse(ctx.mcpReq.inputResponses, approval.id);
      if (answer.kind === "missing") continue;
      deferred.remove(approval);
      const approved =
        answer.kind === "elicit" && answer.action === "accept" && answer.content?.approve === true;
      const { toolId } = approval.request;
      let outcome: { ok: true; value: JsonValue } | { ok: false; message: string };
      if (!approved) {
        outcome = { ok: false, message: `The user declined the call to ${toolId}. The call was not made.` };
      } else {
        try {
          const value = await gateway.runApprovedTool(
            { ...requestFields(approval.request), signal: ctx.mcpReq.signal },
            approval.input,
          );
          outcome = { ok: true, value: (JSON.parse(JSON.stringify(value ?? null)) ?? null) as JsonValue };
        } catch (error) {
          outcome = { ok: false, message: (error as Error).message ?? String(error) };
        }
      }
      await gateway.engine.settleHandedOutCall(runId, approval.callId, outcome);
    }
  };

  /** A waiting result whose run waits on approvals becomes the input-required result that asks for them. */
  const askForApprovals = (result: CodeModeResult): InputRequiredResult | null => {
    if (result.status !== "waiting") return null;
    const pending = deferred.pending(result.runId, ownerKey);
    if (pending.length === 0) return null;
    return inputRequired({
      inputRequests: Object.fromEntries(
        pending.map((approval) => [
          approval.id,
          inputRequired.elicit({ mode: "form", message: approval.message, requestedSchema: APPROVE_SCHEMA }),
        ]),
      ),
      requestState: `${APPROVAL_STATE}${result.runId}`,
    });
  };
  server.onclose = () => session?.end();

  server.setRequestHandler("tools/list", () => {
    const listed = listedTools(current());
    if (debugSwitches().payload) {
      debugLine("payload", `session ${sessionId} tools/list ${JSON.stringify(listed)}`, Infinity, {
        session: sessionId,
      });
    }
    return listed;
  });

  const callTool = async (
    name: string,
    input: unknown,
    ctx: ServerContext,
  ): Promise<CallToolResult | InputRequiredResult> => {
    const session = current();
    const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
    const declared = envelope?.[CLIENT_CAPABILITIES_KEY] as { elicitation?: unknown } | undefined;
    canElicit = declared?.elicitation !== undefined;
    const token = ctx.mcpReq._meta?.progressToken;
    const progress =
      token !== undefined
        ? new CallProgress(token, (notification) => ctx.mcpReq.notify(notification as never))
        : null;
    const options = { signal: ctx.mcpReq.signal, ...(progress ? { onProgress: progress.onProgress } : {}) };
    try {
      if (session.run.active && (name === "exec" || name === "wait")) {
        // A retry that answers approvals resumes the suspended run; it never runs the cell again.
        const state = ctx.mcpReq.requestState();
        let result: CodeModeResult;
        if (typeof state === "string" && state.startsWith(APPROVAL_STATE)) {
          const runId = state.slice(APPROVAL_STATE.length);
          await answerApprovals(runId, ctx);
          result = await session.wait({ runId }, options);
        } else {
          result = name === "exec" ? await session.exec(input, options) : await session.wait(input, options);
        }
        return askForApprovals(result) ?? toCallToolResult(result);
      }
      try {
        const { tool, value } = await session.callDirect(
          name,
          input as JsonValue,
          ctx.mcpReq.signal,
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
  };

  server.setRequestHandler("tools/call", async (request, ctx) => {
    const { name, arguments: input = {} } = request.params;
    const run = () => callTool(name, input, ctx);
    const result = gateway.traceRequest
      ? await gateway.traceRequest(
          mcpRequest({
            method: "tools/call",
            target: name,
            requestId: ctx.mcpReq.id,
            sessionId,
            transport: scope.transport,
            // The 2026-07-28 envelope carries the trace context beside the client's own _meta keys.
            meta: { ...(ctx.mcpReq.envelope ?? {}), ...(ctx.mcpReq._meta ?? {}) } as Record<string, unknown>,
            ...(scope.headers ? { headers: scope.headers } : {}),
          }),
          async (span) => {
            const answer = await run();
            if ((answer as CallToolResult).isError === true) span.fail("tool_error");
            return answer;
          },
        )
      : await run();
    if ("resultType" in result) return result;
    return server.projectCallToolResult(result as never, undefined) as never;
  });

  server.setRequestHandler("resources/list", () => listedResources());
  server.setRequestHandler("resources/templates/list", () => listedResourceTemplates());
  server.setRequestHandler("resources/read", (request) => {
    const { uri } = request.params;
    const answer = readResource(gateway, current, uri);
    if (!answer) throw new ProtocolError(RESOURCE_NOT_FOUND, unknownResourceMessage(uri), { uri });
    return answer;
  });
  return server;
}

/**
 * The fields of a deferred call's request, copied one by one: the nested call's request object keeps
 * its signal on the prototype, and the approved call runs under the retry's signal instead.
 */
function requestFields(request: ToolCallRequest): Omit<ToolCallRequest, "signal"> {
  return {
    tool: request.tool,
    toolId: request.toolId,
    input: request.input,
    sessionId: request.sessionId,
    approvals: request.approvals,
    ...(request.note ? { note: request.note } : {}),
    ...(request.progress ? { progress: request.progress } : {}),
    ...(request.runKey ? { runKey: request.runKey } : {}),
    ...(request.via ? { via: request.via } : {}),
    ...(request.run ? { run: request.run } : {}),
  };
}
