import type { HostRequest } from "@codecell/bridge";
import { toErrorData } from "@codecell/bridge";
import type { CatalogTool, ToolCatalog } from "@codecell/catalog";
import {
  CodeModeError,
  type CodeModeErrorData,
  type CodeModeTelemetry,
  type HostTool,
  type JsonValue,
} from "@codecell/contract";
import { type McpDeclarations, renderApiHeader } from "@codecell/mcp-declarations";
import type { NamespaceRuntime } from "@codecell/namespaces";
import type { SettleOutcome } from "@codecell/sandbox";
import type { CallCancellation } from "./call-cancellation.js";
import type { CallStart } from "./inflight-calls.js";
import { searchMcpTools } from "./mcp-search.js";
import { recordNestedToolId } from "./run-telemetry.js";
import type { TrajectoryHandle, TrajectoryRecorder } from "./trajectory.js";
import type {
  NestedCallVia,
  NestedToolCall,
  RunContext,
  RunProgress,
  ToolExecutor,
  ToolProgress,
} from "./types.js";

/** What a host request needs from the prepared run that is answering it. */
export type RequestScope = {
  catalog: ToolCatalog;
  declarations: McpDeclarations;
  namespaces: NamespaceRuntime;
  context: RunContext;
  executor: ToolExecutor;
  trajectory: TrajectoryRecorder;
  redactInput: (toolId: string, input: JsonValue) => JsonValue;
  /**
   * `tools.call` targets this run's catalog resolved (an id or a unique name): the catalog does not
   * change under a prepared run, and a loop calls the same few tools. Bounded by the catalog's ids and
   * names, since only targets that resolve are kept.
   */
  resolvedTargets: Map<string, CatalogTool>;
};

export type RequestParent = {
  toolCallId: string;
  tool: "exec" | "wait";
  codeModeRunId: string;
  /** Where nested tools' progress goes while the parent call runs. */
  progress?: (event: RunProgress) => void;
  /** What every nested call of this parent shows its executor as `parent` (frozen, so it is shared). */
  readonly forExecutor: NestedToolCall["parent"];
};

/** A parent for the nested calls of one exec or wait call. */
export function requestParent(
  toolCallId: string,
  tool: "exec" | "wait",
  codeModeRunId: string,
  progress: ((event: RunProgress) => void) | undefined,
): RequestParent {
  return {
    toolCallId,
    tool,
    codeModeRunId,
    ...(progress ? { progress } : {}),
    forExecutor: Object.freeze({ toolCallId, tool, codeModeRunId }),
  };
}

/**
 * A request that became work on the host: either answered at once from the catalog (search, describe,
 * $api, or a refusal) or a call through the host's executor, which starts when the run has a free
 * `maxPendingToolCalls` slot for it (see InflightCalls).
 */
export type StartedRequest = { toolId: null; outcome: SettleOutcome } | { toolId: string; start: CallStart };

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
  cancel: CallCancellation,
): Extract<SettleOutcome, { ok: false }> {
  const { name, message } = toErrorData(error);
  if (cancel.aborted) {
    return { ok: false, error: { name, message: `${what} was cancelled: ${message}`, code: "aborted" } };
  }
  return { ok: false, error: { name, message: `${what} failed: ${message}`, code: "nested_tool_failed" } };
}

/**
 * Ends a nested call with what its executor returned (see whenSettled): the trajectory entry closes as
 * completed and the value settles the call, or `failed` says why.
 */
function settleCall(
  result: unknown,
  trajectory: TrajectoryRecorder,
  entry: TrajectoryHandle,
  settle: (outcome: SettleOutcome) => void,
  failed: (error: unknown) => void,
): void {
  whenSettled(
    result,
    (value) => {
      trajectory.end(entry, "completed");
      settle({ ok: true, value });
    },
    failed,
  );
}

const answered = (compute: () => unknown): StartedRequest => {
  try {
    return { toolId: null, outcome: { ok: true, value: compute() } };
  } catch (error) {
    return { toolId: null, outcome: failure(error, "invalid_input") };
  }
};

const promiseThen = Promise.prototype.then;

/**
 * Hands what an executor returned to `completed` or `failed`, once: a promise when it settles, a plain
 * value at once. Nothing is awaited, so a quick call makes no promise of ours beyond one `then`.
 */
function whenSettled(
  result: unknown,
  completed: (value: unknown) => void,
  failed: (error: unknown) => void,
): void {
  let then: unknown;
  try {
    then =
      result !== null && (typeof result === "object" || typeof result === "function")
        ? (result as { then?: unknown }).then
        : undefined;
  } catch (error) {
    // A `then` getter that throws rejects, as `await` would.
    failed(error);
    return;
  }
  if (typeof then !== "function") {
    completed(result);
    return;
  }
  if (then === promiseThen) {
    try {
      promiseThen.call(result, completed, failed);
    } catch (error) {
      // Not a real promise after all (it only inherits `then`): the call throws before calling either.
      failed(error);
    }
    return;
  }
  // Any other thenable is settled the way `await` settles it: once, whatever it calls or throws.
  new Promise((resolve, reject) => then.call(result, resolve, reject)).then(completed, failed);
}

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
      let tool = scope.resolvedTargets.get(request.target);
      if (tool === undefined) {
        try {
          tool = catalog.resolve(request.target);
        } catch (error) {
          return { toolId: null, outcome: failure(error, "invalid_input") };
        }
        scope.resolvedTargets.set(request.target, tool);
      }
      return runNestedCall(
        tool.id,
        request.input,
        "tools.call",
        request.requestId,
        scope,
        parent,
        telemetry,
        tool,
      );
    }
    case "mcp":
      return startMcpRequest(request, scope, parent, telemetry);
    case "namespace": {
      let call: { toolId: string; input: JsonValue };
      try {
        call = scope.namespaces.resolveCall(request.namespaceId, request.path, request.args);
      } catch (error) {
        return { toolId: null, outcome: failure(error, "invalid_input") };
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
  const start: CallStart = (cancel, settle) => {
    const { signal } = cancel;
    const entry = scope.trajectory.startNested(
      scope.context.sessionId,
      parent.toolCallId,
      parent.codeModeRunId,
      tool,
      "mcp",
      request.requestId,
      request.args,
    );
    const failed = (error: unknown): void => {
      const settled = toolFailure(`MCP ${op} of "${server.name}"`, error, cancel);
      scope.trajectory.end(entry, "failed", { code: settled.error.code, error: settled.error.message });
      settle(settled);
    };
    let result: unknown;
    try {
      result = mcpRequest({ server: server.name, op, args: request.args, context: scope.context, signal });
    } catch (error) {
      failed(error);
      return;
    }
    settleCall(result, scope.trajectory, entry, settle, failed);
  };
  return { toolId: tool, start };
}

/**
 * What the executor gets for one nested call. `signal`, `aborted`, `note` and `progress` are getters on
 * the prototype: the signal is made only when read, and an object literal with getters costs
 * microseconds to make (it is built on V8's slow path), a class instance nanoseconds. `note` and
 * `progress` are made on first read and kept, each a function of its own, so a host can pass them on
 * detached; an executor that never reads them costs no closure for them.
 */
class ExecutorCall implements NestedToolCall {
  readonly #cancel: CallCancellation;
  readonly #requestId: string;
  readonly #trajectory: TrajectoryRecorder;
  readonly #entry: TrajectoryHandle;
  readonly #onProgress: ((event: RunProgress) => void) | undefined;
  #note: ((text: string) => void) | null = null;
  #progress: ((update: ToolProgress) => void) | null = null;

  constructor(
    readonly toolId: string,
    readonly tool: HostTool,
    readonly input: JsonValue,
    readonly via: NestedCallVia,
    readonly parent: NestedToolCall["parent"],
    readonly context: RunContext,
    requestId: string,
    trajectory: TrajectoryRecorder,
    entry: TrajectoryHandle,
    onProgress: ((event: RunProgress) => void) | undefined,
    cancel: CallCancellation,
  ) {
    this.#requestId = requestId;
    this.#trajectory = trajectory;
    this.#entry = entry;
    this.#onProgress = onProgress;
    this.#cancel = cancel;
  }

  get signal(): AbortSignal {
    return this.#cancel.signal;
  }

  get aborted(): boolean {
    return this.#cancel.aborted;
  }

  get note(): (text: string) => void {
    if (this.#note === null) {
      const trajectory = this.#trajectory;
      const entry = this.#entry;
      this.#note = (text) => trajectory.note(entry, text);
    }
    return this.#note;
  }

  get progress(): (update: ToolProgress) => void {
    if (this.#progress === null) {
      const onProgress = this.#onProgress;
      const { toolId } = this;
      const callId = this.#requestId;
      this.#progress = (update) => onProgress?.({ kind: "tool", toolId, callId, ...update });
    }
    return this.#progress;
  }
}

function runNestedCall(
  toolId: string,
  input: JsonValue,
  via: NestedCallVia,
  requestId: string,
  scope: RequestScope,
  parent: RequestParent,
  telemetry: CodeModeTelemetry,
  resolved?: CatalogTool,
): StartedRequest {
  const catalogTool = resolved ?? scope.catalog.get(toolId);
  if (!catalogTool) {
    return answered(() => {
      throw new CodeModeError("invalid_input", `Unknown tool id "${toolId}".`);
    });
  }
  // Counted when the cell makes the call, so a run suspended with calls queued reports them.
  telemetry.nested.calls++;
  recordNestedToolId(telemetry, toolId);
  const start: CallStart = (cancel, settle) => {
    const entry = scope.trajectory.startNested(
      scope.context.sessionId,
      parent.toolCallId,
      parent.codeModeRunId,
      toolId,
      via,
      requestId,
      scope.redactInput(toolId, input),
    );
    const failed = (error: unknown): void => {
      telemetry.nested.failedCalls++;
      const settled = toolFailure(`Tool ${toolId}`, error, cancel);
      scope.trajectory.end(entry, "failed", { code: settled.error.code, error: settled.error.message });
      settle(settled);
    };
    let result: unknown;
    try {
      result = scope.executor.callTool(
        new ExecutorCall(
          toolId,
          catalogTool.tool,
          input,
          via,
          parent.forExecutor,
          scope.context,
          requestId,
          scope.trajectory,
          entry,
          parent.progress,
          cancel,
        ),
      );
    } catch (error) {
      failed(error);
      return;
    }
    settleCall(result, scope.trajectory, entry, settle, failed);
  };
  return { toolId, start };
}
