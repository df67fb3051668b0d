// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file turns one host request into what answers it: catalog answers (search, describe, the MCP
// API header) at once, or a `HostCall` that runs through the host's `ToolExecutor` (`ToolCall` for a
// tool, `McpOperationCall` for a server's resources and prompts), with its trajectory entry, span and
// the view an executor gets (`ExecutorCall`, the `NestedToolCall` of types.ts).

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
import type { CellStore } from "./cell-store.js";
import { InflightCall } from "./inflight-calls.js";
import { searchMcpTools } from "./mcp-search.js";
import { recordNestedToolId } from "./run-telemetry.js";
import { StoreCall } from "./store-call.js";
import { spanJson, startSpan, type TracedSpan, type TracingOptions } from "./tracing.js";
import type { TrajectoryHandle, TrajectoryRecorder } from "./trajectory.js";
import type {
  EngineObserver,
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
  /** `API.read(path)`: one declaration file's text (the guest holds only paths and sizes). */
  readApiFile: (path: string) => string;
  /** The host's metrics hooks (absent: nothing is measured for them). */
  observer: EngineObserver | null;
  tracing: TracingOptions;
  /** The values cells keep between cells (`store`, `load`), in the engine's snapshot store. */
  cellStore: CellStore;
};

export type RequestParent = {
  toolCallId: string;
  tool: "exec" | "wait";
  codeModeRunId: string;
  /** Where nested tools' progress goes while the parent call runs (the field is always there: one shape). */
  progress: ((event: RunProgress) => void) | undefined;
  /** What every nested call of this parent shows its executor as `parent` (frozen, so it is shared). */
  readonly forExecutor: NestedToolCall["parent"];
  /** The exec or wait call's span when it records: nested calls get spans of their own under it. */
  readonly span: TracedSpan | null;
  /** A nested call of this parent was handed out of the host: the segment suspends once idle. */
  onHandOut: (() => void) | undefined;
};

/** A parent for the nested calls of one exec or wait call. */
export function requestParent(
  toolCallId: string,
  tool: "exec" | "wait",
  codeModeRunId: string,
  progress: ((event: RunProgress) => void) | undefined,
  span: TracedSpan | null = null,
  onHandOut?: () => void,
): RequestParent {
  return {
    toolCallId,
    tool,
    codeModeRunId,
    progress,
    forExecutor: Object.freeze({ toolCallId, tool, codeModeRunId }),
    span,
    onHandOut,
  };
}

/**
 * A request that became work on the host: either answered at once from the catalog (search, describe,
 * $api, or a refusal: an outcome) or a call through the host's executor, which starts when the run has
 * a free `maxPendingToolCalls` slot for it (an InflightCall, see InflightCalls).
 */
export type StartedRequest = SettleOutcome | InflightCall;

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

const answered = (compute: () => unknown): SettleOutcome => {
  try {
    return { ok: true, value: compute() };
  } catch (error) {
    return failure(error, "invalid_input");
  }
};

const promiseThen = Promise.prototype.then;

/**
 * A call through the host: its trajectory entry, and how what the host answered ends it. Subclasses
 * say what they call.
 */
abstract class HostCall extends InflightCall {
  entry: TrajectoryHandle | null = null;
  /** This call's span, made only under a recording exec/wait span. */
  span: TracedSpan | null = null;

  constructor(
    requestId: string,
    toolId: string,
    readonly scope: RequestScope,
    readonly parent: RequestParent,
  ) {
    super(requestId, toolId);
  }

  /** How a failure reads: `Tool <id>`, `MCP <op> of "<server>"`. */
  protected abstract describe(): string;

  /** Where the call's tool comes from and how the cell reached it, for spans and metrics. */
  protected abstract get source(): string;
  protected abstract get via(): NestedCallVia;

  /**
   * The call's span, after the GenAI conventions for a tool execution (`execute_tool <tool>`), under
   * the exec/wait span; the input only when the host opted in, and as the trajectory records it.
   */
  protected startSpan(toolName: string, input: () => JsonValue): void {
    const { parent, scope } = this;
    if (parent.span === null) return;
    const toolId = this.toolId;
    const server = this.source === "mcp" ? toolId.split(":")[1] : undefined;
    this.span = startSpan(`execute_tool ${toolName}`, {
      parent: parent.span,
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": toolName,
        "gen_ai.tool.call.id": this.requestId,
        "gen_ai.tool.type": "function",
        "codecell.tool.id": toolId,
        "codecell.tool.source": this.source,
        "codecell.tool.via": this.via,
        "codecell.mcp.server": server,
        "codecell.run.id": parent.codeModeRunId,
        "gen_ai.tool.call.arguments": scope.tracing.recordInputs ? spanJson(input()) : undefined,
      },
    });
  }

  #observe(outcome: "completed" | "failed" | "aborted"): void {
    const { observer } = this.scope;
    if (observer === null || observer.nestedCallEnded === undefined) return;
    try {
      observer.nestedCallEnded({
        toolId: this.toolId,
        source: this.source,
        via: this.via,
        outcome,
        durationMs: Date.now() - this.startedAtMs,
      });
    } catch {
      // The host's observer is told, not obeyed: its failure must not change how the call ends.
    }
  }

  /**
   * Ends the call with what the host returned: a promise when it settles, a plain value at once.
   * Nothing is awaited, so a quick call makes no promise of ours beyond one `then`.
   */
  protected answer(result: unknown): void {
    let then: unknown;
    try {
      then =
        result !== null && (typeof result === "object" || typeof result === "function")
          ? (result as { then?: unknown }).then
          : undefined;
    } catch (error) {
      // A `then` getter that throws rejects, as `await` would.
      this.failed(error);
      return;
    }
    if (typeof then !== "function") {
      this.completed(result);
      return;
    }
    const completed = (value: unknown): void => this.completed(value);
    const failed = (error: unknown): void => this.failed(error);
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

  protected completed(value: unknown): void {
    if (this.handedOut) return;
    if (this.entry !== null) this.scope.trajectory.end(this.entry, "completed");
    if (this.span !== null) {
      this.span.end({
        "codecell.outcome": "completed",
        "gen_ai.tool.call.result": this.scope.tracing.recordOutputs ? spanJson(value) : undefined,
      });
      this.span = null;
    }
    this.#observe("completed");
    this.finish({ ok: true, value });
  }

  protected failed(error: unknown): void {
    if (this.handedOut) return;
    const settled = toolFailure(this.describe(), error, this);
    if (this.entry !== null) {
      this.scope.trajectory.end(this.entry, "failed", {
        code: settled.error.code,
        error: settled.error.message,
      });
    }
    const outcome = settled.error.code === "aborted" ? "aborted" : "failed";
    if (this.span !== null) {
      this.span.end({ "codecell.outcome": outcome }, settled.error.code, settled.error.message);
      this.span = null;
    }
    this.#observe(outcome);
    this.finish(settled);
  }
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
          return failure(error, "invalid_input");
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
    case "store":
      return new StoreCall(request, scope, parent);
    case "api":
      return answered(() => scope.readApiFile(request.path));
    case "namespace": {
      let call: { toolId: string; input: JsonValue };
      try {
        call = scope.namespaces.resolveCall(request.namespaceId, request.path, request.args);
      } catch (error) {
        return failure(error, "invalid_input");
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
  return new McpOperationCall(request, server.name, op, mcpRequest, scope, parent);
}

/** A server's resources or prompts request (`MCP.<server>.resources.*`), through `executor.mcpRequest`. */
class McpOperationCall extends HostCall {
  constructor(
    readonly request: Extract<HostRequest, { kind: "mcp" }>,
    readonly server: string,
    readonly op: Exclude<Extract<HostRequest, { kind: "mcp" }>["op"], "call" | "$api">,
    readonly mcpRequest: NonNullable<ToolExecutor["mcpRequest"]>,
    scope: RequestScope,
    parent: RequestParent,
  ) {
    super(request.requestId, `mcp:${server}:${op}`, scope, parent);
  }

  protected describe(): string {
    return `MCP ${this.op} of "${this.server}"`;
  }

  protected get source(): string {
    return "mcp";
  }

  protected get via(): NestedCallVia {
    return "mcp";
  }

  protected run(): void {
    const { scope, parent, request } = this;
    this.startSpan(this.op, () => request.args);
    this.entry = scope.trajectory.startNested(
      scope.context.sessionId,
      parent.toolCallId,
      parent.codeModeRunId,
      this.toolId,
      "mcp",
      request.requestId,
      request.args,
      // Taken by the in-flight table when the call started running.
      this.startedAtMs,
    );
    let result: unknown;
    try {
      const send = () =>
        this.mcpRequest({
          server: this.server,
          op: this.op,
          args: request.args,
          context: scope.context,
          signal: this.signal,
        });
      result = this.span === null ? send() : this.span.run(send);
    } catch (error) {
      this.failed(error);
      return;
    }
    this.answer(result);
  }
}

/**
 * What the executor gets for one nested call. `signal`, `aborted`, `note` and `progress` are getters on
 * the prototype: the signal is made only when read, and an object literal with getters costs
 * microseconds to make (it is built on V8's slow path), a class instance nanoseconds. `note` and
 * `progress` are made on first read and kept, each a function of its own, so a host can pass them on
 * detached; an executor that never reads them costs no closure for them.
 */
class ExecutorCall implements NestedToolCall {
  readonly #call: ToolCall;
  #note: ((text: string) => void) | null = null;
  #progress: ((update: ToolProgress) => void) | null = null;

  constructor(
    readonly toolId: string,
    readonly tool: HostTool,
    readonly input: JsonValue,
    readonly via: NestedCallVia,
    readonly parent: NestedToolCall["parent"],
    readonly context: RunContext,
    call: ToolCall,
  ) {
    this.#call = call;
  }

  get signal(): AbortSignal {
    return this.#call.signal;
  }

  get aborted(): boolean {
    return this.#call.aborted;
  }

  get note(): (text: string) => void {
    if (this.#note === null) {
      const { trajectory } = this.#call.scope;
      const entry = this.#call.entry!;
      this.#note = (text) => trajectory.note(entry, text);
    }
    return this.#note;
  }

  get callId(): string {
    return this.#call.requestId;
  }

  handOut(): void {
    this.#call.handOut();
  }

  get progress(): (update: ToolProgress) => void {
    if (this.#progress === null) {
      const onProgress = this.#call.parent.progress;
      const { toolId } = this;
      const callId = this.#call.requestId;
      this.#progress = (update) => onProgress?.({ kind: "tool", toolId, callId, ...update });
    }
    return this.#progress;
  }
}

/** A tool call through the host's executor (`tools.*`, `tools.call`, a namespace, `MCP.<server>.<tool>`). */
class ToolCall extends HostCall {
  constructor(
    requestId: string,
    toolId: string,
    readonly tool: HostTool,
    readonly input: JsonValue,
    readonly nestedVia: NestedCallVia,
    scope: RequestScope,
    parent: RequestParent,
    readonly telemetry: CodeModeTelemetry,
  ) {
    super(requestId, toolId, scope, parent);
  }

  protected describe(): string {
    return `Tool ${this.toolId}`;
  }

  protected get source(): string {
    return this.tool.source;
  }

  protected get via(): NestedCallVia {
    return this.nestedVia;
  }

  protected run(): void {
    const { scope, parent, toolId } = this;
    this.entry = scope.trajectory.startNested(
      scope.context.sessionId,
      parent.toolCallId,
      parent.codeModeRunId,
      toolId,
      this.nestedVia,
      this.requestId,
      scope.redactInput(toolId, this.input),
      // Taken by the in-flight table when the call started running.
      this.startedAtMs,
    );
    if (parent.span !== null) this.startSpan(this.tool.name, () => scope.redactInput(toolId, this.input));
    let result: unknown;
    try {
      const call = new ExecutorCall(
        toolId,
        this.tool,
        this.input,
        this.nestedVia,
        parent.forExecutor,
        scope.context,
        this,
      );
      // Under its span, a downstream client's own span (an MCP request) is the call's child.
      result =
        this.span === null
          ? scope.executor.callTool(call)
          : this.span.run(() => scope.executor.callTool(call));
    } catch (error) {
      this.failed(error);
      return;
    }
    this.answer(result);
  }

  /** See NestedToolCall.handOut. A call that has already settled stays settled. */
  handOut(): void {
    if (this.handedOut || this.outcome !== undefined || this.aborted) return;
    this.handedOut = true;
    // Its span ends here: the result comes in another request, perhaps on another replica.
    if (this.span !== null) {
      this.span.end({ "codecell.outcome": "handed_out" });
      this.span = null;
    }
    if (this.entry !== null) {
      this.scope.trajectory.note(this.entry, "handed out of the host; its result comes with the next wait");
      this.scope.trajectory.end(this.entry, "waiting");
    }
    this.parent.onHandOut?.();
  }

  protected override failed(error: unknown): void {
    if (this.handedOut) return;
    this.telemetry.nested.failedCalls++;
    super.failed(error);
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
  return new ToolCall(requestId, toolId, catalogTool.tool, input, via, scope, parent, telemetry);
}
