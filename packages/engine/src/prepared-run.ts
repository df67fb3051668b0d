import { setMaxListeners } from "node:events";
import type { GuestSurface, HostRequest } from "@codecell/bridge";
import type { CatalogTool, ToolCatalog } from "@codecell/catalog";
import {
  CodeModeError,
  type CodeModeErrorCode,
  type CodeModeOutput,
  type CodeModeResult,
  type CodeModeTelemetry,
  type JsonValue,
  parseExecInput,
  parseWaitInput,
  type ResolvedCodeModeConfig,
} from "@codecell/contract";
import { type ApiFileTable, createApiFileTable, type McpDeclarations } from "@codecell/mcp-declarations";
import { createCodeModeNamespaceRuntime, type NamespaceRuntime } from "@codecell/namespaces";
import type { SandboxPool, SandboxRun, SettleOutcome } from "@codecell/sandbox";
import { type ClaimedRun, newRunId, type RunScope, type SnapshotStore } from "@codecell/snapshot-store";
import { type CellTypecheck, type EngineTypecheck, RunTypecheck, withDiagnostics } from "./cell-typecheck.js";
import { driveSegment, ReadyQueue, type SegmentEnd } from "./drive-segment.js";
import { explainGuestFailure } from "./guest-failure-hints.js";
import { buildGuestSurface } from "./guest-surface.js";
import { InflightCall, InflightCalls, type OutcomeSink } from "./inflight-calls.js";
import { EXEC_TOOL_NAME, WAIT_TOOL_NAME } from "./model-surface.js";
import { type RequestParent, type RequestScope, requestParent, startHostRequest } from "./nested-calls.js";
import { ResultShapes } from "./result-shapes.js";
import { countLimitFailure, newRunTelemetry } from "./run-telemetry.js";
import { spanJson, startSpan, type TracedSpan, type TracingOptions } from "./tracing.js";
import type { TrajectoryHandle, TrajectoryRecorder } from "./trajectory.js";
import type {
  ControlCall,
  EngineObserver,
  EngineStats,
  ExecHookMetadata,
  ModelTool,
  PreparedRun,
  PrepareRunOptions,
  RunProgress,
} from "./types.js";

/** Engine-owned JSON kept with a suspended run in the store. */
type RunHostState = { runKey: string; yieldRequestIds: string[] };

/** The engine state a prepared run uses: config, counters, store, pool, trajectory and in-flight calls. */
export type EngineShared = {
  readonly config: ResolvedCodeModeConfig;
  readonly stats: EngineStats;
  readonly store: Promise<SnapshotStore>;
  readonly pool: SandboxPool;
  readonly trajectory: TrajectoryRecorder;
  readonly redactInput: (toolId: string, input: JsonValue) => JsonValue;
  readonly debug: ((line: string) => void) | null;
  readonly inflight: Map<string, InflightCalls>;
  readonly observer: EngineObserver | null;
  readonly tracing: TracingOptions;
  /** The engine's type checker of cells (typecheck "warn" or "strict"); it loads nothing until used. */
  readonly typecheck: EngineTypecheck;
  abort(selector: { sessionId: string; runId?: string }): Promise<number>;
  countResult(result: CodeModeResult): void;
};

export function inactiveRun(reason: "disabled" | "no_tools", modelTools: ModelTool[]): PreparedRun {
  const refuse = async (): Promise<CodeModeResult> => {
    throw new CodeModeError(
      "invalid_input",
      reason === "disabled"
        ? "Code mode is disabled for this run (tools.codeMode.enabled is not true)."
        : "Code mode is not active for a run without tools.",
    );
  };
  return { active: false, reason, modelTools, exec: refuse, wait: refuse, hookMetadata: hookMetadataOf };
}

function hookMetadataOf(input: unknown): ExecHookMetadata {
  const language = (input as { language?: unknown } | null)?.language;
  if (language === "typescript") return { toolKind: "code_mode_exec", toolInputKind: "typescript" };
  if (language === undefined || language === "javascript") {
    return { toolKind: "code_mode_exec", toolInputKind: "javascript" };
  }
  return { toolKind: "code_mode_exec" };
}

/** What the exec control entry records of the model's input: the cell and its language. */
function cellOf(input: unknown): JsonValue {
  const fields = (typeof input === "object" && input !== null ? input : {}) as Record<string, unknown>;
  const code =
    typeof fields.code === "string"
      ? fields.code
      : typeof fields.command === "string"
        ? fields.command
        : null;
  const language = typeof fields.language === "string" ? fields.language : "javascript";
  return code === null ? { language } : { language, code };
}
/**
 * One exec or wait segment: its abort signal, the nested calls it started that are still running, and
 * its progress sink with the counts it reports.
 */
type Segment = {
  signal: AbortSignal;
  /** Set just before `signal` aborts (see SegmentAbort): the hot path reads this, not the signal. */
  aborted: boolean;
  /** A nested call of this segment was handed out of the host: suspend once idle (see SegmentAbort). */
  handedOut: boolean;
  release(): void;
  /** Present or not, the field is there: every segment has the same shape. */
  progress: ((event: RunProgress) => void) | undefined;
  counts: { started: number; settled: number };
};

export class ActiveRun implements PreparedRun {
  readonly active = true;
  readonly reason = "active" as const;
  /** The guest surface and request scope of the latest segment; namespaces are rebuilt for each one. */
  #surface: GuestSurface;
  #scope: RequestScope;
  #namespacesKey: string;
  readonly #declarations: McpDeclarations;
  readonly #runScope: Omit<RunScope, "toolCallId">;
  readonly #abort = new AbortController();
  #typecheck: RunTypecheck | null = null;

  constructor(
    readonly engine: EngineShared,
    readonly options: PrepareRunOptions,
    readonly catalog: ToolCatalog,
    declarations: McpDeclarations,
    namespaces: NamespaceRuntime,
    readonly modelTools: readonly ModelTool[],
  ) {
    this.#declarations = declarations;
    this.#surface = buildGuestSurface(catalog, declarations, namespaces);
    this.#namespacesKey = JSON.stringify(namespaces.namespaces);
    this.#scope = this.#requestScope(namespaces, new Map());
    const { agentId, sessionKey, sessionId, runId } = options.context;
    this.#runScope = { agentId, sessionKey, sessionId, parentRunId: runId };
    // Every nested call in flight listens for the run's abort; there can be many at once.
    setMaxListeners(0, this.#abort.signal);
    const signal = options.context.signal;
    if (signal) {
      const onAbort = () => {
        this.#abort.abort();
        void engine.abort({ sessionId, runId }).catch(() => {});
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    }
  }

  hookMetadata(input: unknown): ExecHookMetadata {
    return hookMetadataOf(input);
  }

  /**
   * Namespace scopes are built for each exec and wait, from the registry as it is now: a plugin cleared
   * with `clearCodeModeNamespacesForPlugin` after this run was prepared leaves no global in the next
   * exec, and a resumed VM that still holds its global gets `invalid_input` for any call through it.
   * The surface is rebuilt only when the namespaces changed, so a run without changes reuses it.
   */
  #refreshNamespaces(): RequestScope {
    const { context } = this.options;
    const namespaces = createCodeModeNamespaceRuntime(
      {
        runId: context.runId,
        agentId: context.agentId,
        sessionKey: context.sessionKey,
        sessionId: context.sessionId,
        config: context.config,
        signal: context.signal,
      },
      this.catalog,
    );
    const key = JSON.stringify(namespaces.namespaces);
    if (key !== this.#namespacesKey) {
      this.#namespacesKey = key;
      this.#surface = buildGuestSurface(this.catalog, this.#declarations, namespaces);
    }
    this.#scope = this.#requestScope(namespaces, this.#scope.resolvedTargets);
    return this.#scope;
  }

  /**
   * Every scope comes from this one literal, so all have one hidden class (map): a scope spread from the
   * previous one got a map of its own in each exec, and the nested-call path's optimized code, which
   * reads the scope on every call, was thrown away (deoptimized) each time.
   */
  #requestScope(namespaces: NamespaceRuntime, resolvedTargets: Map<string, CatalogTool>): RequestScope {
    const { engine, options } = this;
    return {
      catalog: this.catalog,
      declarations: this.#declarations,
      namespaces,
      context: options.context,
      executor: options.executor,
      trajectory: engine.trajectory,
      redactInput: engine.redactInput,
      resolvedTargets,
      readApiFile: this.#readApiFile,
      observer: engine.observer,
      tracing: engine.tracing,
    };
  }

  /** The virtual API files as `API.read` answers them (the mcp-declarations table), made on the first read. */
  #apiFileTable: ApiFileTable | null = null;
  readonly #readApiFile = (path: string): string => {
    this.#apiFileTable ??= createApiFileTable(this.#declarations.files);
    return this.#apiFileTable.read(path);
  };

  #telemetryBase(): CodeModeTelemetry {
    return newRunTelemetry(
      this.modelTools.map((tool) => tool.name),
      this.catalog,
    );
  }

  #failed(
    code: CodeModeErrorCode | undefined,
    error: string,
    telemetry: CodeModeTelemetry,
    output: CodeModeOutput[] = [],
    startedAt = Date.now(),
  ): CodeModeResult {
    countLimitFailure(telemetry, code);
    telemetry.durationMs = Date.now() - startedAt;
    return {
      status: "failed",
      error,
      ...(code ? { code } : {}),
      ...(output.length ? { output } : {}),
      telemetry,
    };
  }

  async exec(input: unknown, call: ControlCall): Promise<CodeModeResult> {
    const startedAt = Date.now();
    const { engine } = this;
    engine.stats.execCount++;
    const telemetry = this.#telemetryBase();
    telemetry.execCount = 1;
    // The run id the model will be given is chosen now, so every nested call of this exec is recorded
    // under it (and the executor sees the same id in exec and in every later wait).
    const runId = newRunId();
    const control = engine.trajectory.start(this.options.context.sessionId, {
      kind: "control",
      toolCallId: call.toolCallId,
      tool: EXEC_TOOL_NAME,
      codeModeRunId: runId,
      // The cell itself, through the same redaction hook as nested inputs, so a transcript can be replayed.
      input: engine.redactInput(EXEC_TOOL_NAME, cellOf(input)),
    });
    const span = this.#controlSpan(EXEC_TOOL_NAME, call, runId, input);
    let result: CodeModeResult;
    try {
      const request = parseExecInput(input, engine.config.languages, engine.config.maxCodeBytes);
      result = await this.#runExec(
        request.code,
        request.language,
        call,
        telemetry,
        startedAt,
        call.toolCallId,
        runId,
        span,
      );
      if (
        request.language === "javascript" &&
        result.status === "failed" &&
        result.code === "invalid_input"
      ) {
        result = await this.#typeScriptWithoutTheFlag(
          request.code,
          result,
          call,
          telemetry,
          startedAt,
          control,
          runId,
          span,
        );
      }
    } catch (error) {
      result = this.#failure(error, telemetry, startedAt);
    }
    return this.#finishControl(control, EXEC_TOOL_NAME, call.toolCallId, result, span, startedAt, runId);
  }

  async wait(input: unknown, call: ControlCall): Promise<CodeModeResult> {
    const startedAt = Date.now();
    const { engine } = this;
    engine.stats.waitCount++;
    let telemetry = this.#telemetryBase();
    telemetry.waitCount = 1;
    const control = engine.trajectory.start(this.options.context.sessionId, {
      kind: "control",
      toolCallId: call.toolCallId,
      tool: WAIT_TOOL_NAME,
    });
    const span = this.#controlSpan(WAIT_TOOL_NAME, call, undefined, input);
    let result: CodeModeResult;
    let waitedRunId: string | undefined;
    try {
      const { runId } = parseWaitInput(input);
      waitedRunId = runId;
      span?.set({ "codecell.run.id": runId });
      engine.trajectory.annotate(control, { codeModeRunId: runId });
      const store = await engine.store;
      const restore = span ? startSpan("codecell.snapshot.restore", { parent: span }) : null;
      let claim: ClaimedRun;
      try {
        claim = await store.claim(runId, this.#runScope);
      } catch (error) {
        restore?.end(undefined, CodeModeError.is(error) ? error.code : "internal_error");
        throw error;
      }
      restore?.end({
        "codecell.run.id": runId,
        "codecell.snapshot.bytes": claim.snapshot.byteLength,
        "codecell.pending_calls": claim.pendingCalls.length,
      });
      this.#observe("snapshot", { kind: "restore", bytes: claim.snapshot.byteLength });
      telemetry = claim.telemetry;
      telemetry.waitCount++;
      telemetry.snapshotEvents.push({ event: "resumed", runId });
      result = await this.#resume(claim, call, telemetry, startedAt, span);
    } catch (error) {
      result = this.#failure(error, telemetry, startedAt);
    }
    return this.#finishControl(
      control,
      WAIT_TOOL_NAME,
      call.toolCallId,
      result,
      span,
      startedAt,
      waitedRunId,
    );
  }

  /**
   * A cell sent as JavaScript that does not parse as JavaScript but does as TypeScript (models often write
   * types without setting `language`). With TypeScript enabled it runs as TypeScript, and the telemetry
   * says so (`detectedLanguage`); nothing of the first attempt ran, since it failed before the VM started.
   * With TypeScript disabled the error says the cell looks like TypeScript and which setting allows it.
   */
  async #typeScriptWithoutTheFlag(
    code: string,
    failed: Extract<CodeModeResult, { status: "failed" }>,
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    control: TrajectoryHandle,
    runId: string,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { isTypeScriptOnly } = await import("@codecell/transpile");
    if (!(await isTypeScriptOnly(code).catch(() => false))) return failed;
    if (!this.engine.config.languages.includes("typescript")) {
      return {
        ...failed,
        error: `${failed.error} The cell looks like TypeScript (it parses once its types are removed), and TypeScript is not enabled here: write it as JavaScript without type annotations, or ask for the setting tools.codeMode.languages: ["javascript", "typescript"].`,
      };
    }
    telemetry.detectedLanguage = "typescript";
    this.engine.trajectory.updateInput(control, (recorded) => ({
      ...(typeof recorded === "object" && recorded !== null && !Array.isArray(recorded) ? recorded : {}),
      language: "typescript",
      detectedLanguage: "typescript",
    }));
    span?.set({ "codecell.detected_language": "typescript" });
    return this.#runExec(code, "typescript", call, telemetry, startedAt, call.toolCallId, runId, span);
  }

  #failure(error: unknown, telemetry: CodeModeTelemetry, startedAt: number): CodeModeResult {
    if (CodeModeError.is(error)) return this.#failed(error.code, error.message, telemetry, [], startedAt);
    return this.#failed("internal_error", `Internal error: ${String(error)}`, telemetry, [], startedAt);
  }

  /**
   * The exec or wait call's span, after the GenAI conventions for a tool execution (`execute_tool exec`),
   * under whatever context the host made active (its incoming request's, which may carry a client's
   * trace). Null unless a tracer provider is registered and the sampler kept it.
   */
  #controlSpan(
    tool: "exec" | "wait",
    call: ControlCall,
    runId: string | undefined,
    input: unknown,
  ): TracedSpan | null {
    const { context } = this.options;
    const span = startSpan(`execute_tool ${tool}`, {
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call.toolCallId,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": context.sessionId,
        "gen_ai.agent.id": context.agentId,
        "codecell.agent_run.id": context.runId,
        "codecell.run.id": runId,
      },
    });
    if (span !== null && this.engine.tracing.recordInputs) {
      span.set({
        "gen_ai.tool.call.arguments": spanJson(
          tool === EXEC_TOOL_NAME ? this.engine.redactInput(EXEC_TOOL_NAME, cellOf(input)) : input,
        ),
      });
    }
    return span;
  }

  #observe<K extends keyof EngineObserver>(
    hook: K,
    event: Parameters<NonNullable<EngineObserver[K]>>[0],
  ): void {
    const listener = this.engine.observer?.[hook] as ((event: unknown) => void) | undefined;
    if (listener === undefined) return;
    try {
      listener.call(this.engine.observer, event);
    } catch {}
  }

  #finishControl(
    control: TrajectoryHandle,
    tool: "exec" | "wait",
    toolCallId: string,
    result: CodeModeResult,
    span: TracedSpan | null,
    startedAt: number,
    knownRunId: string | undefined,
  ): CodeModeResult {
    const { engine } = this;
    engine.countResult(result);
    const code = result.status === "failed" ? (result.code ?? "guest_error") : undefined;
    if (engine.observer?.controlEnded !== undefined) {
      const runId = result.status === "waiting" ? result.runId : knownRunId;
      this.#observe("controlEnded", {
        tool,
        status: result.status,
        ...(code !== undefined ? { code } : {}),
        durationMs: Date.now() - startedAt,
        nestedCalls: result.telemetry.nested.calls,
        ...(runId !== undefined ? { runId } : {}),
        sessionId: this.options.context.sessionId,
        ...(span !== null ? { traceId: span.span.spanContext().traceId } : {}),
      });
    }
    if (span !== null) {
      const { nested } = result.telemetry;
      span.end(
        {
          "codecell.status": result.status,
          "codecell.run.id": result.status === "waiting" ? result.runId : undefined,
          "codecell.waiting.reason": result.status === "waiting" ? result.reason : undefined,
          "codecell.pending_calls":
            result.status === "waiting" ? (result.pendingToolCalls?.length ?? 0) : undefined,
          "codecell.nested.calls": nested.calls,
          "codecell.nested.failed_calls": nested.failedCalls,
          "codecell.nested.searches": nested.searches,
          "codecell.nested.describes": nested.describes,
          "codecell.output.entries": result.output?.length ?? 0,
          "gen_ai.tool.call.result":
            result.status === "completed" && engine.tracing.recordOutputs
              ? spanJson(result.value)
              : undefined,
        },
        code,
        result.status === "failed" ? result.error.slice(0, 500) : undefined,
      );
    }
    if (result.status === "waiting") {
      engine.trajectory.annotate(control, {
        codeModeRunId: result.runId,
        ...(result.yieldReason !== undefined ? { yieldReason: result.yieldReason } : {}),
      });
    }
    engine.trajectory.end(
      control,
      result.status,
      result.status === "failed" ? { code: result.code, error: result.error } : undefined,
    );
    engine.debug?.(
      `${tool} ${toolCallId}: ${result.status}${result.status === "failed" ? ` (${result.code ?? "guest error"}: ${result.error.slice(0, 200)})` : ""}; nested calls ${result.telemetry.nested.calls}, searches ${result.telemetry.nested.searches}, describes ${result.telemetry.nested.describes}`,
    );
    return result;
  }

  async #runExec(
    code: string,
    language: "javascript" | "typescript",
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    toolCallId: string,
    runId: string,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { engine } = this;
    // New runs are keyed by their run id; runs suspended by an older version keep the key they stored.
    const runKey = runId;
    const inflight = new InflightCalls(this.options.context.sessionId, engine.config.maxPendingToolCalls);
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    const segment = this.#segment(call, inflight);
    const { signal } = segment;
    const parent = requestParent(toolCallId, "exec", runId, segment.progress, span, () => {
      segment.handedOut = true;
      ready.wake();
    });
    // What this exec's nested calls returned, so a failure can say what a name holds.
    const shapes = new ResultShapes();
    const scope = this.#refreshNamespaces();
    const surface = this.#surface;
    // "warn" checks while the cell runs (its findings are added at the end); "strict" first.
    const checking = this.#typecheckCell(code, language, surface);
    const checked = engine.config.typecheck === "strict" ? await checking : null;
    if (checked && checked.total > 0) {
      // Refused before the VM starts: nothing of the cell ran, no nested call was made.
      segment.release();
      const failed = this.#failed("invalid_input", checked.strictMessage, telemetry, [], startedAt);
      return withDiagnostics(failed, checked);
    }
    let run: SandboxRun;
    try {
      run = engine.pool.run({
        // Fairness between sessions: one session's spinning cells never hold every worker.
        owner: this.options.context.sessionId,
        code,
        language,
        surface,
        limits: this.#limits(),
        // The cell's own wall-clock budget: the sandbox starts it when the VM is ready, so a
        // worker's cold start does not count (it has its own bound, reported runtime_unavailable).
        timeoutMs: engine.config.timeoutMs,
        signal,
        onRequest: (request) =>
          this.#onRequest(request, scope, inflight, ready, yieldIds, parent, telemetry, segment),
      });
    } catch (error) {
      segment.release();
      return this.#failure(error, telemetry, startedAt);
    }
    inflight.attach(this.#sinkFor(ready, segment, shapes));
    engine.inflight.set(runKey, inflight);
    const end = await driveSegment(run, ready, segment).finally(segment.release);
    // A bare QuickJS TypeError gets the expression it is about (the JavaScript cell is what ran as is,
    // so only it has places to look up); a ReferenceError, in either language, what the name may be.
    if (end.type === "failed" && end.code === undefined) {
      end.message = await explainGuestFailure(end.message, language === "javascript" ? code : null, surface, {
        shapes,
        resolveTarget: (target) => {
          try {
            return scope.catalog.resolve(target).id;
          } catch {
            return null;
          }
        },
        namespaceToolId: (namespaceId, path) => {
          try {
            return scope.namespaces.resolveCall(namespaceId, path, []).toolId;
          } catch {
            return null;
          }
        },
      }).catch(() => end.message);
    }
    const result = await this.#settleSegment(end, {
      runKey,
      runId,
      inflight,
      ready,
      yieldIds,
      telemetry,
      startedAt,
      claim: null,
      call,
      span,
    });
    return withDiagnostics(result, checked ?? (await checking));
  }

  /** The cell's type-check findings with typecheck "warn" or "strict"; null when off or not checked. */
  async #typecheckCell(
    code: string,
    language: "javascript" | "typescript",
    surface: GuestSurface,
  ): Promise<CellTypecheck> {
    if (this.engine.config.typecheck === "off") return null;
    this.#typecheck ??= new RunTypecheck(this.engine.typecheck, this.catalog, this.#declarations);
    // A checker that fails never fails the cell: it runs as it would without the check.
    return this.#typecheck.check(code, language, surface).catch(() => null);
  }

  async #resume(
    claim: ClaimedRun,
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const store = await engine.store;
    const hostState = (claim.hostState ?? { runKey: claim.runId, yieldRequestIds: [] }) as RunHostState;
    const runKey = hostState.runKey;
    let inflight = engine.inflight.get(runKey);
    if (!inflight) {
      inflight = new InflightCalls(this.options.context.sessionId, engine.config.maxPendingToolCalls);
      engine.inflight.set(runKey, inflight);
    }
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    // Results owed to the guest: yields continue now, settled calls go in, running ones follow.
    for (const requestId of hostState.yieldRequestIds) ready.push(requestId, { ok: true, value: null });
    // Calls running in another process that shares the store (another gateway replica).
    const elsewhere: string[] = [];
    for (const pending of claim.pendingCalls) {
      const outcome = pending.outcome ?? inflight.take(pending.callId);
      if (outcome) ready.push(pending.callId, outcome);
      else if (inflight.get(pending.callId)) continue;
      else if (store.sharesOutcomes) elsewhere.push(pending.callId);
      else {
        ready.push(pending.callId, {
          ok: false,
          error: {
            name: "Error",
            message: `Nested call to ${pending.toolId} was lost: it is not running in this process.`,
            code: "nested_tool_failed",
          },
        });
      }
    }
    inflight.attach((requestId, outcome, settled) => ready.push(requestId, outcome, settled.toolId));
    // Their outcomes arrive as the replica running them records them (or as "interrupted" once its
    // lease is gone); this segment delivers them like local ones until its deadline.
    let stopWatching: (() => Promise<void>) | null = null;
    if (elsewhere.length > 0) {
      const toolIds = new Map(claim.pendingCalls.map((pending) => [pending.callId, pending.toolId]));
      try {
        stopWatching = await store.watchOutcomes(claim.runId, elsewhere, (callId, outcome) =>
          ready.push(callId, outcome as SettleOutcome, toolIds.get(callId)),
        );
      } catch (error) {
        inflight.detach();
        await store.release(claim).catch(() => {});
        return this.#failure(error, telemetry, startedAt);
      }
    }
    const segment = this.#segment(call, inflight);
    inflight.attach(this.#sinkFor(ready, segment));
    const { signal } = segment;
    const parent = requestParent(call.toolCallId, "wait", claim.runId, segment.progress, span, () => {
      segment.handedOut = true;
      ready.wake();
    });
    const scope = this.#refreshNamespaces();
    let run: SandboxRun;
    try {
      run = engine.pool.restore({
        // Fairness between sessions: one session's spinning cells never hold every worker.
        owner: this.options.context.sessionId,
        snapshot: claim.snapshot,
        limits: this.#limits(),
        // The cell's own wall-clock budget: the sandbox starts it when the VM is ready, so a
        // worker's cold start does not count (it has its own bound, reported runtime_unavailable).
        timeoutMs: engine.config.timeoutMs,
        signal,
        onRequest: (request) =>
          this.#onRequest(request, scope, inflight, ready, yieldIds, parent, telemetry, segment),
      });
    } catch (error) {
      segment.release();
      await stopWatching?.();
      await store.finish(claim, "failed").catch(() => {});
      return this.#failure(error, telemetry, startedAt);
    }
    const end = await driveSegment(run, ready, segment).finally(segment.release);
    // An outcome recorded after this stays in the store, and the next claim reads it from there.
    await stopWatching?.();
    return this.#settleSegment(end, {
      runKey,
      runId: claim.runId,
      inflight,
      ready,
      yieldIds,
      telemetry,
      startedAt,
      claim,
      call,
      span,
    });
  }

  /**
   * The abort of one exec or wait segment: the whole run's abort, or the control call's own cancellation,
   * while the segment runs. Released when it ends, so calls still pending in a waiting run outlive the
   * request that started them (they end with the run, through the in-flight table).
   */
  #segment(call: ControlCall, inflight: InflightCalls): Segment {
    const controller = new AbortController();
    // The driver and the run listen for it; with the control call's own signal there can be several.
    setMaxListeners(0, controller.signal);
    const sources = [this.#abort.signal, ...(call.signal ? [call.signal] : [])];
    // The only way the segment's signal aborts, so `segment.aborted` reads as `signal.aborted` does.
    const onAbort = () => {
      segment.aborted = true;
      controller.abort();
    };
    let open = true;
    const listener = call.onProgress;
    const segment: Segment = {
      signal: controller.signal,
      aborted: false,
      handedOut: false,
      counts: { started: 0, settled: 0 },
      release: () => {
        open = false;
        for (const source of sources) source.removeEventListener("abort", onAbort);
      },
      // Progress reaches the host only while this call runs; a listener that throws cannot break the run.
      progress: listener
        ? (event: RunProgress) => {
            if (!open) return;
            try {
              listener(event);
            } catch {}
          }
        : undefined,
    };
    // One listener aborts every nested call the segment started and has not settled (a listener per
    // call cost more than the call itself in a loop of quick calls).
    controller.signal.addEventListener(
      "abort",
      () => inflight.abortOwnedBy(segment, "The code-mode run was aborted."),
      { once: true },
    );
    for (const source of sources) {
      if (source.aborted) onAbort();
      else source.addEventListener("abort", onAbort, { once: true });
    }
    return segment;
  }

  #limits() {
    const { config } = this.engine;
    return {
      memoryLimitBytes: config.memoryLimitBytes,
      maxOutputBytes: config.maxOutputBytes,
      maxPendingToolCalls: config.maxPendingToolCalls,
      maxQueuedToolCalls: config.maxQueuedToolCalls,
      maxSnapshotBytes: config.maxSnapshotBytes,
    };
  }

  #onRequest(
    request: HostRequest,
    scope: RequestScope,
    inflight: InflightCalls,
    ready: ReadyQueue,
    yieldIds: Set<string>,
    parent: RequestParent,
    telemetry: CodeModeTelemetry,
    segment: Segment,
  ): void {
    if (request.kind === "yield") {
      yieldIds.add(request.requestId);
      return;
    }
    const started = startHostRequest(request, scope, parent, telemetry);
    const { stats } = this.engine;
    if (request.kind === "search") stats.nestedSearches++;
    else if (request.kind === "describe") stats.nestedDescribes++;
    if (!(started instanceof InflightCall)) {
      // Answered from the catalog; the driver delivers it (never from inside the sandbox's callback).
      ready.push(request.requestId, started);
      return;
    }
    if (request.kind !== "mcp" || request.op === "call") stats.nestedCalls++;
    if (segment.aborted) started.abort(new Error("The code-mode run was aborted."));
    if (segment.progress) {
      const { counts } = segment;
      counts.started++;
      segment.progress({ kind: "calls", ...counts, pending: counts.started - counts.settled });
    }
    // Runs now, or waits in order for one of the run's maxPendingToolCalls slots; the outcome comes
    // back through the sink, with this segment as the call's owner.
    inflight.add(started, segment);
  }

  /**
   * Where the in-flight table hands outcomes while this segment drives the run: into the ready queue,
   * and into the books of the segment that made the call (its abort set, the shapes of results for
   * failure hints, its progress counts). A call an earlier segment made is only delivered.
   */
  #sinkFor(ready: ReadyQueue, segment: Segment, shapes?: ResultShapes): OutcomeSink {
    return (requestId, outcome, call) => {
      ready.push(requestId, outcome, call.toolId);
      if (call.owner !== segment) return;
      if (shapes && outcome.ok) shapes.record(call.toolId, outcome.value);
      if (segment.progress) {
        const { counts } = segment;
        counts.settled++;
        segment.progress({ kind: "calls", ...counts, pending: counts.started - counts.settled });
      }
    };
  }

  async #settleSegment(
    end: SegmentEnd,
    state: {
      runKey: string;
      /** The run id the model has (or is about to get). */
      runId: string;
      inflight: InflightCalls;
      ready: ReadyQueue;
      yieldIds: Set<string>;
      telemetry: CodeModeTelemetry;
      startedAt: number;
      claim: ClaimedRun | null;
      call: ControlCall;
      span: TracedSpan | null;
    },
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const store = await engine.store;
    const { telemetry, claim, inflight } = state;
    state.inflight.detach();
    if (end.type !== "waiting") {
      engine.inflight.delete(state.runKey);
      inflight.abortAll("The code-mode run ended.");
      if (claim) {
        await store.finish(claim, end.type).catch(() => {});
        telemetry.snapshotEvents.push({ event: "deleted", runId: claim.runId });
      }
      telemetry.durationMs = Date.now() - state.startedAt;
      if (end.type === "completed") {
        return {
          status: "completed",
          value: end.value,
          ...(end.output.length ? { output: end.output } : {}),
          telemetry,
        };
      }
      return this.#failed(end.code, end.message, telemetry, end.output, state.startedAt);
    }

    // Outcomes that reached the segment while the VM was being snapshotted were not delivered: they
    // are stored with the run, or the next wait would report those calls as lost.
    const undelivered = new Map(
      state.ready.drain().map(([requestId, outcome, toolId]) => [requestId, { outcome, toolId }]),
    );
    const queuedIds = new Set<string>();
    const pendingCalls = end.pending
      .filter((request) => request.kind !== "yield")
      .map((request) => {
        const call = inflight.get(request.requestId);
        const left = undelivered.get(request.requestId);
        const outcome = call?.outcome ?? left?.outcome;
        // Still owed by the process that ran it before (another replica): kept as the store had it.
        const owed = claim?.pendingCalls.find((pending) => pending.callId === request.requestId);
        if (call?.queued && !outcome) queuedIds.add(request.requestId);
        return {
          callId: request.requestId,
          toolId: call?.toolId ?? left?.toolId ?? owed?.toolId ?? request.kind,
          startedAt: call
            ? new Date(call.startedAtMs).toISOString()
            : (owed?.startedAt ?? new Date().toISOString()),
          ...(outcome ? { outcome: outcome as never } : {}),
        };
      });
    const yields = end.pending.filter((request) => request.kind === "yield");
    const yieldRequestIds = yields.map((request) => request.requestId);
    // The guest's own words for the pause; bounded, since guest code chooses them.
    const yieldReason = yields.map((request) => request.reason).find((reason) => reason !== undefined);
    const hostState: RunHostState = { runKey: state.runKey, yieldRequestIds };
    telemetry.durationMs = Date.now() - state.startedAt;
    const payload = {
      snapshot: end.snapshot,
      pendingCalls,
      output: end.output,
      telemetry,
      hostState: hostState as unknown as JsonValue,
    };
    let runId: string;
    const suspend = state.span
      ? startSpan("codecell.snapshot.suspend", {
          parent: state.span,
          attributes: {
            "codecell.pending_calls": pendingCalls.length,
            "codecell.waiting.reason": end.reason,
          },
        })
      : null;
    try {
      const stored = claim
        ? await store.resuspend(claim, payload)
        : await store.suspend({
            ...payload,
            runId: state.runId,
            scope: { ...this.#runScope, toolCallId: state.call.toolCallId },
          });
      runId = stored.runId;
      telemetry.snapshotEvents.push({ event: "stored", runId, bytes: stored.bytes });
      suspend?.end({
        "codecell.run.id": runId,
        "codecell.snapshot.bytes": end.snapshot.byteLength,
        "codecell.snapshot.stored_bytes": stored.bytes,
      });
      this.#observe("snapshot", { kind: "suspend", bytes: stored.bytes });
    } catch (error) {
      suspend?.end(undefined, CodeModeError.is(error) ? error.code : "internal_error");
      engine.inflight.delete(state.runKey);
      inflight.abortAll("The code-mode run could not be stored.");
      if (claim) await store.finish(claim, "failed").catch(() => {});
      return this.#failure(error, telemetry, state.startedAt);
    }
    // Handed-out calls are answered through the store (settleHandedOutCall); nothing here waits on them.
    inflight.releaseHandedOut();
    inflight.storedAs(store, runId, () => {
      if (engine.inflight.get(state.runKey) === inflight) engine.inflight.delete(state.runKey);
    });
    return {
      status: "waiting",
      runId,
      reason: end.reason,
      ...(end.reason === "yield" && yieldReason !== undefined
        ? { yieldReason: yieldReason.slice(0, 500) }
        : {}),
      ...(pendingCalls.length
        ? {
            pendingToolCalls: pendingCalls.map(({ callId, toolId, startedAt }) => ({
              callId,
              toolId,
              startedAt,
              ...(queuedIds.has(callId) ? { queued: true as const } : {}),
            })),
          }
        : {}),
      ...(end.output.length ? { output: end.output } : {}),
      telemetry,
    };
  }
}
