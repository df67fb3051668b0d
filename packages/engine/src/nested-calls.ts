import type { HostRequest } from "@codecell/bridge";
import { toErrorData } from "@codecell/bridge";
import type { ToolCatalog } from "@codecell/catalog";
import {
  CodeModeError,
  type CodeModeErrorData,
  type CodeModeTelemetry,
  type JsonValue,
} from "@codecell/contract";
import { type McpDeclarations, renderApiHeader } from "@codecell/mcp-declarations";
import type { NamespaceRuntime } from "@codecell/namespaces";
import type { SettleOutcome } from "@codecell/sandbox";
import { searchMcpTools } from "./mcp-search.js";
import { recordNestedToolId } from "./run-telemetry.js";
import type { TrajectoryRecorder } from "./trajectory.js";
import type { NestedCallVia, RunContext, RunProgress, ToolExecutor } from "./types.js";

/** What a host request needs from the prepared run that is answering it. */
export type RequestScope = {
  catalog: ToolCatalog;
  declarations: McpDeclarations;
  namespaces: NamespaceRuntime;
  context: RunContext;
  executor: ToolExecutor;
  trajectory: TrajectoryRecorder;
  redactInput: (toolId: string, input: JsonValue) => JsonValue;
};

export type RequestParent = {
  toolCallId: string;
  tool: "exec" | "wait";
  codeModeRunId: string;
  /** Where nested tools' progress goes while the parent call runs. */
  progress?: (event: RunProgress) => void;
};

/**
 * A request that became work on the host: either answered at once from the catalog (search, describe,
 * $api, or a refusal) or a call through the host's executor, which starts when the run has a free
 * `maxPendingToolCalls` slot for it (see InflightCalls).
 */
export type StartedRequest =
  | { toolId: null; outcome: Promise<SettleOutcome> }
  | { toolId: string; start: (signal: AbortSignal) => Promise<SettleOutcome> };

function failure(error: unknown, fallbackCode: "nested_tool_failed" | "invalid_input"): SettleOutcome {
  if (CodeModeError.is(error)) return { ok: false, error: error.toData() };
  const data: CodeModeErrorData = toErrorData(error);
  return { ok: false, error: { ...data, code: data.code ?? fallbackCode } };
}

/**
 * A nested tool's failure as the guest sees it. Codes belong to the runtime: whatever a tool throws
 * (a `CodeModeError` with any code included) becomes `nested_tool_failed` with the tool's message, so a
 * tool cannot pass for a limit or inject a code. Only a call the run itself cancelled is `aborted`.
 */
function toolFailure(
  what: string,
  error: unknown,
  signal: AbortSignal,
): Extract<SettleOutcome, { ok: false }> {
  const { name, message } = toErrorData(error);
  if (signal.aborted) {
    return { ok: false, error: { name, message: `${what} was cancelled: ${message}`, code: "aborted" } };
  }
  return { ok: false, error: { name, message: `${what} failed: ${message}`, code: "nested_tool_failed" } };
}

const answered = (compute: () => unknown): StartedRequest => {
  try {
    return { toolId: null, outcome: Promise.resolve({ ok: true, value: compute() }) };
  } catch (error) {
    return { toolId: null, outcome: Promise.resolve(failure(error, "invalid_input")) };
  }
};

/**
 * Turns one guest request into host work. Catalog lookups are answered here; calls go through the
 * host's executor with the run's context, a signal tied to the run, and a trajectory entry under the
 * parent exec/wait call. Policy is the catalog's: a tool missing from it cannot be reached.
 */
export function startHostRequest(
  request: Exclude<HostRequest, { kind: "yield" }>,
  scope: RequestScope,
  parent: RequestParent,
  telemetry: CodeModeTelemetry,
): StartedRequest {
  const { catalog } = scope;
  switch (request.kind) {
    case "search":
      telemetry.nested.searches++;
      if (request.scope === "mcp") {
        return answered(() =>
          searchMcpTools(catalog, scope.declarations, String(request.query ?? ""), request.options?.limit),
        );
      }
      return answered(() => catalog.search(String(request.query ?? ""), { limit: request.options?.limit }));
    case "describe":
      telemetry.nested.describes++;
      return answered(() => catalog.describe(request.target));
    case "call": {
      let toolId: string;
      try {
        toolId = catalog.resolve(request.target).id;
      } catch (error) {
        return { toolId: null, outcome: Promise.resolve(failure(error, "invalid_input")) };
      }
      return runNestedCall(toolId, request.input, "tools.call", request.requestId, scope, parent, telemetry);
    }
    case "mcp":
      return startMcpRequest(request, scope, parent, telemetry);
    case "namespace": {
      let call: { toolId: string; input: JsonValue };
      try {
        call = scope.namespaces.resolveCall(request.namespaceId, request.path, request.args);
      } catch (error) {
        return { toolId: null, outcome: Promise.resolve(failure(error, "invalid_input")) };
      }
      return runNestedCall(call.toolId, call.input, "namespace", request.requestId, scope, parent, telemetry);
    }
  }
}

function startMcpRequest(
  request: Extract<HostRequest, { kind: "mcp" }>,
  scope: RequestScope,
  parent: RequestParent,
  telemetry: CodeModeTelemetry,
): StartedRequest {
  const server = scope.declarations.servers.find((candidate) => candidate.identifier === request.server);
  if (!server) {
    return answered(() => {
      throw new CodeModeError(
        "invalid_input",
        `MCP server "${request.server}" is not available in this run.`,
      );
    });
  }
  if (request.op === "$api") {
    const [toolName, options] = request.args;
    return answered(() =>
      renderApiHeader(
        server,
        toolName === undefined || toolName === null ? undefined : (toolName as string),
        (options ?? {}) as { schema?: boolean },
      ),
    );
  }
  if (request.op === "call") {
    const toolId = request.toolId ?? "";
    if (!toolId.startsWith(`mcp:${server.name}:`)) {
      return answered(() => {
        throw new CodeModeError("invalid_input", `"${toolId}" is not a tool of MCP server "${server.name}".`);
      });
    }
    const input = request.args[0] ?? {};
    return runNestedCall(toolId, input, "mcp", request.requestId, scope, parent, telemetry);
  }
  const op = request.op;
  const mcpRequest = scope.executor.mcpRequest?.bind(scope.executor);
  if (!mcpRequest) {
    return answered(() => {
      throw new CodeModeError("nested_tool_failed", `This host does not serve MCP ${op} requests.`);
    });
  }
  const tool = `mcp:${server.name}:${op}`;
  const start = (signal: AbortSignal): Promise<SettleOutcome> => {
    const entry = scope.trajectory.start(scope.context.sessionId, {
      kind: "nested",
      toolCallId: `${parent.toolCallId}/${request.requestId}`,
      parentToolCallId: parent.toolCallId,
      tool,
      codeModeRunId: parent.codeModeRunId,
      via: "mcp",
      input: request.args,
    });
    return mcpRequest({
      server: server.name,
      op,
      args: request.args,
      context: scope.context,
      signal,
    }).then(
      (value): SettleOutcome => {
        scope.trajectory.end(entry, "completed");
        return { ok: true, value };
      },
      (error): SettleOutcome => {
        const settled = toolFailure(`MCP ${op} of "${server.name}"`, error, signal);
        scope.trajectory.end(entry, "failed", { code: settled.error.code, error: settled.error.message });
        return settled;
      },
    );
  };
  return { toolId: tool, start };
}

function runNestedCall(
  toolId: string,
  input: JsonValue,
  via: NestedCallVia,
  requestId: string,
  scope: RequestScope,
  parent: RequestParent,
  telemetry: CodeModeTelemetry,
): StartedRequest {
  const catalogTool = scope.catalog.get(toolId);
  if (!catalogTool) {
    return answered(() => {
      throw new CodeModeError("invalid_input", `Unknown tool id "${toolId}".`);
    });
  }
  // Counted when the cell makes the call, so a run suspended with calls queued reports them.
  telemetry.nested.calls++;
  recordNestedToolId(telemetry, toolId);
  const start = async (signal: AbortSignal): Promise<SettleOutcome> => {
    const entry = scope.trajectory.start(scope.context.sessionId, {
      kind: "nested",
      toolCallId: `${parent.toolCallId}/${requestId}`,
      parentToolCallId: parent.toolCallId,
      tool: toolId,
      codeModeRunId: parent.codeModeRunId,
      via,
      input: scope.redactInput(toolId, input),
    });
    try {
      const value = await scope.executor.callTool({
        toolId,
        tool: catalogTool.tool,
        input,
        via,
        parent: { toolCallId: parent.toolCallId, tool: parent.tool, codeModeRunId: parent.codeModeRunId },
        context: scope.context,
        signal,
        note: (text) => scope.trajectory.note(entry, text),
        progress: (update) => parent.progress?.({ kind: "tool", toolId, callId: requestId, ...update }),
      });
      scope.trajectory.end(entry, "completed");
      return { ok: true, value };
    } catch (error) {
      telemetry.nested.failedCalls++;
      const settled = toolFailure(`Tool ${toolId}`, error, signal);
      scope.trajectory.end(entry, "failed", { code: settled.error.code, error: settled.error.message });
      return settled;
    }
  };
  return { toolId, start };
}
