import { setMaxListeners } from "node:events";
import type { GuestSurface, HostRequest } from "@codecell/bridge";
import { buildToolCatalog, type ToolCatalog } from "@codecell/catalog";
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
  resolveCodeModeConfig,
} from "@codecell/contract";
import type { McpDeclarations } from "@codecell/mcp-declarations";
import { createCodeModeNamespaceRuntime, type NamespaceRuntime } from "@codecell/namespaces";
import { createSandboxPool, type SandboxPool, type SandboxRun } from "@codecell/sandbox";
import {
  type ClaimedRun,
  openSnapshotStore,
  type RunScope,
  type SnapshotStore,
} from "@codecell/snapshot-store";
import { driveSegment, ReadyQueue, type SegmentEnd } from "./drive-segment.js";
import { buildGuestSurface, renderVisibleDeclarations } from "./guest-surface.js";
import { InflightCalls } from "./inflight-calls.js";
import { codeModeModelTools, EXEC_TOOL_NAME, WAIT_TOOL_NAME } from "./model-surface.js";
import { type RequestScope, startHostRequest } from "./nested-calls.js";
import { countLimitFailure, newRunTelemetry } from "./run-telemetry.js";
import { type TrajectoryExport, TrajectoryRecorder } from "./trajectory.js";
import type {
  CodeModeEngineOptions,
  ControlCall,
  EngineStats,
  ExecHookMetadata,
  ModelTool,
  PreparedRun,
  PrepareRunOptions,
  RunContext,
} from "./types.js";

/** Engine-owned JSON kept with a suspended run in the store. */
type RunHostState = { runKey: string; yieldRequestIds: string[] };

function isResolvedConfig(value: unknown): value is ResolvedCodeModeConfig {
  return (
    typeof value === "object" && value !== null && Array.isArray((value as { clamped?: unknown }).clamped)
  );
}

function debugSink(option: CodeModeEngineOptions["debug"]): ((line: string) => void) | null {
  if (option) return option;
  if (process.env.CODECELL_DEBUG_CODE_MODE === "1") {
    return (line) => process.stderr.write(`[codecell] ${line}\n`);
  }
  return null;
}

/**
 * The code-mode engine a host embeds. It owns the sandbox pool and the snapshot store shared by all
 * runs; `prepareRun` decides activation for one agent run and returns what the model sees plus the
 * exec and wait handlers.
 */
export class CodeModeEngine {
  readonly config: ResolvedCodeModeConfig;
  readonly store: Promise<SnapshotStore>;
  readonly #trajectory: TrajectoryRecorder;
  readonly #redactInput: (toolId: string, input: JsonValue) => JsonValue;
  readonly #debug: ((line: string) => void) | null;
  readonly #inflight = new Map<string, InflightCalls>();
  readonly #ownsPool: boolean;
  readonly #ownsStore: boolean;
  #pool: SandboxPool | undefined;
  readonly stats: EngineStats = {
    runsPrepared: 0,
    activeRuns: 0,
    execCount: 0,
    waitCount: 0,
    results: { completed: 0, waiting: 0, failed: 0 },
    failuresByCode: {},
    nestedCalls: 0,
    nestedSearches: 0,
    nestedDescribes: 0,
    snapshotEvents: { stored: 0, resumed: 0, expired: 0, aborted: 0, deleted: 0, refused: 0 },
  };

  constructor(options: CodeModeEngineOptions) {
    this.config = isResolvedConfig(options.config) ? options.config : resolveCodeModeConfig(options.config);
    this.#pool = options.pool;
    this.#ownsPool = !options.pool;
    this.#ownsStore = !options.store;
    this.store = options.store
      ? Promise.resolve(options.store)
      : openSnapshotStore({
          maxSnapshotBytes: this.config.maxSnapshotBytes,
          snapshotTtlSeconds: this.config.snapshotTtlSeconds,
          onEvent: (event) => {
            this.stats.snapshotEvents[event.event]++;
            this.#debug?.(`snapshot ${event.event}${event.reason ? ` (${event.reason})` : ""}`);
          },
        });
    this.#trajectory = new TrajectoryRecorder(options.maxTrajectoryEntries ?? 10_000);
    this.#redactInput = options.redactInput ?? ((_toolId, input) => input);
    this.#debug = debugSink(options.debug);
  }

  get pool(): SandboxPool {
    this.#pool ??= createSandboxPool();
    return this.#pool;
  }

  /** Decides code mode for one agent run (the spec's activation order) and returns its surface. */
  prepareRun(options: PrepareRunOptions): PreparedRun {
    this.stats.runsPrepared++;
    const passthrough = (reason: "disabled" | "no_tools"): PreparedRun => {
      this.#debug?.(`activation: ${reason}; ${options.tools.length} tools passed through unchanged`);
      return inactiveRun(reason, options.tools.map(toModelTool));
    };
    if (!this.config.enabled) return passthrough("disabled");
    const noTools =
      options.disableTools === true || options.tools.length === 0 || options.allow?.length === 0;
    if (noTools) return passthrough("no_tools");

    // Policy first: the catalog holds only what allow/deny leave.
    const catalog = buildToolCatalog([...options.tools], {
      allow: options.allow,
      deny: options.deny,
      searchDefaultLimit: this.config.searchDefaultLimit,
      maxSearchLimit: this.config.maxSearchLimit,
    });
    const declarations = renderVisibleDeclarations(options.mcpServers ?? [], catalog);
    const namespaces = createCodeModeNamespaceRuntime(
      {
        runId: options.context.runId,
        agentId: options.context.agentId,
        sessionKey: options.context.sessionKey,
        sessionId: options.context.sessionId,
        config: options.context.config,
        signal: options.context.signal,
      },
      catalog,
    );
    const modelTools = [
      ...codeModeModelTools({
        mcpServers: declarations.servers.map((server) => server.identifier),
        namespacePrompt: namespaces.promptText,
        typescript: this.config.languages.includes("typescript"),
      }),
      ...catalog.directOnly.map(toModelTool),
    ];
    this.stats.activeRuns++;
    this.#debug?.(
      `activation: active; model sees ${modelTools.map((tool) => tool.name).join(", ")}; catalog ${catalog.entries.length} tools ${JSON.stringify(catalog.countsBySource)}; mcp servers ${declarations.servers.length}; namespaces ${namespaces.namespaces.map((ns) => ns.globalName).join(", ") || "none"}`,
    );
    return new ActiveRun(this.#shared(), options, catalog, declarations, namespaces, modelTools);
  }

  /** Aborts every waiting and running code-mode run of a session (or of one agent run in it). */
  async abort(selector: { sessionId: string; runId?: string }, reason = "session_aborted"): Promise<number> {
    for (const [key, calls] of this.#inflight) {
      if (calls.sessionId === selector.sessionId) {
        calls.abortAll(reason);
        this.#inflight.delete(key);
      }
    }
    const store = await this.store;
    return store.abort(
      selector.runId
        ? { sessionId: selector.sessionId, parentRunId: selector.runId }
        : { sessionId: selector.sessionId },
      selector.runId ? "run_aborted" : reason,
    );
  }

  /** The session is over: its suspended runs are deleted and its nested calls cancelled. */
  async endSession(sessionId: string): Promise<number> {
    await this.abort({ sessionId }, "session_ended");
    return (await this.store).endSession({ sessionId });
  }

  /** Nested calls under their exec/wait calls, as JSON for transcript persistence. */
  exportTrajectory(filter?: { parentToolCallId?: string; codeModeRunId?: string }): TrajectoryExport {
    return this.#trajectory.export(filter);
  }

  async close(): Promise<void> {
    for (const calls of this.#inflight.values()) calls.abortAll("engine closed");
    this.#inflight.clear();
    if (this.#ownsPool) await this.#pool?.close();
    if (this.#ownsStore) await (await this.store).close();
  }

  /** What every prepared run shares with the engine; kept off the engine's public surface. */
  #shared(): EngineShared {
    const engine = this;
    return {
      config: this.config,
      stats: this.stats,
      store: this.store,
      get pool() {
        return engine.pool;
      },
      trajectory: this.#trajectory,
      redactInput: this.#redactInput,
      debug: this.#debug,
      inflight: this.#inflight,
      abort: (selector) => this.abort(selector),
      countResult: (result) => {
        if (result.status === "failed") {
          this.stats.results.failed++;
          const code = result.code ?? "guest_error";
          this.stats.failuresByCode[code] = (this.stats.failuresByCode[code] ?? 0) + 1;
        } else {
          this.stats.results[result.status]++;
        }
      },
    };
  }
}

/** The engine state a prepared run uses: config, counters, store, pool, trajectory and in-flight calls. */
type EngineShared = {
  readonly config: ResolvedCodeModeConfig;
  readonly stats: EngineStats;
  readonly store: Promise<SnapshotStore>;
  readonly pool: SandboxPool;
  readonly trajectory: TrajectoryRecorder;
  readonly redactInput: (toolId: string, input: JsonValue) => JsonValue;
  readonly debug: ((line: string) => void) | null;
  readonly inflight: Map<string, InflightCalls>;
  abort(selector: { sessionId: string; runId?: string }): Promise<number>;
  countResult(result: CodeModeResult): void;
};

export function createCodeModeEngine(options: CodeModeEngineOptions): CodeModeEngine {
  return new CodeModeEngine(options);
}

function toModelTool(tool: { name: string; description: string; parameters: unknown }): ModelTool {
  return { name: tool.name, description: tool.description, inputSchema: tool.parameters };
}

function inactiveRun(reason: "disabled" | "no_tools", modelTools: ModelTool[]): PreparedRun {
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

function randomKey(): string {
  return crypto.randomUUID();
}

class ActiveRun implements PreparedRun {
  readonly active = true;
  readonly reason = "active" as const;
  readonly #surface: GuestSurface;
  readonly #scope: RequestScope;
  readonly #runScope: Omit<RunScope, "toolCallId">;
  readonly #abort = new AbortController();

  constructor(
    readonly engine: EngineShared,
    readonly options: PrepareRunOptions,
    readonly catalog: ToolCatalog,
    declarations: McpDeclarations,
    namespaces: NamespaceRuntime,
    readonly modelTools: readonly ModelTool[],
  ) {
    this.#surface = buildGuestSurface(catalog, declarations, namespaces);
    this.#scope = {
      catalog,
      declarations,
      namespaces,
      context: options.context,
      executor: options.executor,
      trajectory: engine.trajectory,
      redactInput: engine.redactInput,
    };
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
    const control = engine.trajectory.start({
      kind: "control",
      toolCallId: call.toolCallId,
      tool: EXEC_TOOL_NAME,
      input: { language: (input as { language?: JsonValue } | null)?.language ?? "javascript" },
    });
    let result: CodeModeResult;
    try {
      const request = parseExecInput(input, engine.config.languages);
      result = await this.#runExec(
        request.code,
        request.language,
        call,
        telemetry,
        startedAt,
        control.toolCallId,
      );
    } catch (error) {
      result = this.#failure(error, telemetry, startedAt);
    }
    return this.#finishControl(control, result);
  }

  async wait(input: unknown, call: ControlCall): Promise<CodeModeResult> {
    const startedAt = Date.now();
    const { engine } = this;
    engine.stats.waitCount++;
    let telemetry = this.#telemetryBase();
    telemetry.waitCount = 1;
    const control = engine.trajectory.start({
      kind: "control",
      toolCallId: call.toolCallId,
      tool: WAIT_TOOL_NAME,
    });
    let result: CodeModeResult;
    try {
      const { runId } = parseWaitInput(input);
      control.codeModeRunId = runId;
      const store = await engine.store;
      const claim = await store.claim(runId, this.#runScope);
      telemetry = claim.telemetry;
      telemetry.waitCount++;
      telemetry.snapshotEvents.push({ event: "resumed", runId });
      result = await this.#resume(claim, call, telemetry, startedAt);
    } catch (error) {
      result = this.#failure(error, telemetry, startedAt);
    }
    return this.#finishControl(control, result);
  }

  #failure(error: unknown, telemetry: CodeModeTelemetry, startedAt: number): CodeModeResult {
    if (CodeModeError.is(error)) return this.#failed(error.code, error.message, telemetry, [], startedAt);
    return this.#failed("internal_error", `Internal error: ${String(error)}`, telemetry, [], startedAt);
  }

  #finishControl(control: ReturnType<TrajectoryRecorder["start"]>, result: CodeModeResult): CodeModeResult {
    const { engine } = this;
    engine.countResult(result);
    if (result.status === "waiting") control.codeModeRunId = result.runId;
    engine.trajectory.end(
      control,
      result.status,
      result.status === "failed" ? { code: result.code, error: result.error } : undefined,
    );
    engine.debug?.(
      `${control.tool} ${control.toolCallId}: ${result.status}${result.status === "failed" ? ` (${result.code ?? "guest error"}: ${result.error.slice(0, 200)})` : ""}; nested calls ${result.telemetry.nested.calls}, searches ${result.telemetry.nested.searches}, describes ${result.telemetry.nested.describes}`,
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
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const runKey = randomKey();
    const inflight = new InflightCalls(this.options.context.sessionId);
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    const parent = { toolCallId, tool: "exec" as const, codeModeRunId: runKey };
    const deadlineAt = startedAt + engine.config.timeoutMs;
    const segment = this.#segment(call);
    const { signal } = segment;
    let run: SandboxRun;
    try {
      run = engine.pool.run({
        code,
        language,
        surface: this.#surface,
        limits: this.#limits(),
        deadlineAt,
        signal,
        onRequest: (request) =>
          this.#onRequest(request, inflight, ready, yieldIds, parent, telemetry, signal),
      });
    } catch (error) {
      segment.release();
      return this.#failure(error, telemetry, startedAt);
    }
    inflight.attach((requestId, outcome) => ready.push(requestId, outcome));
    engine.inflight.set(runKey, inflight);
    const end = await driveSegment(run, ready, deadlineAt, signal).finally(segment.release);
    return this.#settleSegment(end, { runKey, inflight, yieldIds, telemetry, startedAt, claim: null, call });
  }

  async #resume(
    claim: ClaimedRun,
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const store = await engine.store;
    const hostState = (claim.hostState ?? { runKey: randomKey(), yieldRequestIds: [] }) as RunHostState;
    const runKey = hostState.runKey;
    let inflight = engine.inflight.get(runKey);
    if (!inflight) {
      inflight = new InflightCalls(this.options.context.sessionId);
      engine.inflight.set(runKey, inflight);
    }
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    const parent = { toolCallId: call.toolCallId, tool: "wait" as const, codeModeRunId: claim.runId };
    const deadlineAt = startedAt + engine.config.timeoutMs;
    // Results owed to the guest: yields continue now, settled calls go in, running ones follow.
    for (const requestId of hostState.yieldRequestIds) ready.push(requestId, { ok: true, value: null });
    for (const pending of claim.pendingCalls) {
      const outcome = pending.outcome ?? inflight.take(pending.callId);
      if (outcome) ready.push(pending.callId, outcome);
      else if (!inflight.get(pending.callId)) {
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
    inflight.attach((requestId, outcome) => ready.push(requestId, outcome));
    const segment = this.#segment(call);
    const { signal } = segment;
    let run: SandboxRun;
    try {
      run = engine.pool.restore({
        snapshot: claim.snapshot,
        limits: this.#limits(),
        deadlineAt,
        signal,
        onRequest: (request) =>
          this.#onRequest(request, inflight, ready, yieldIds, parent, telemetry, signal),
      });
    } catch (error) {
      segment.release();
      await store.finish(claim, "failed").catch(() => {});
      return this.#failure(error, telemetry, startedAt);
    }
    const end = await driveSegment(run, ready, deadlineAt, signal).finally(segment.release);
    return this.#settleSegment(end, { runKey, inflight, yieldIds, telemetry, startedAt, claim, call });
  }

  /**
   * The abort of one exec or wait segment: the whole run's abort, or the control call's own cancellation,
   * while the segment runs. Released when it ends, so calls still pending in a waiting run outlive the
   * request that started them (they end with the run, through the in-flight table).
   */
  #segment(call: ControlCall): { signal: AbortSignal; release(): void } {
    const controller = new AbortController();
    // Every nested call in flight listens for it; there can be many at once.
    setMaxListeners(0, controller.signal);
    const sources = [this.#abort.signal, ...(call.signal ? [call.signal] : [])];
    const onAbort = () => controller.abort();
    for (const source of sources) {
      if (source.aborted) controller.abort();
      else source.addEventListener("abort", onAbort, { once: true });
    }
    return {
      signal: controller.signal,
      release: () => {
        for (const source of sources) source.removeEventListener("abort", onAbort);
      },
    };
  }

  #limits() {
    const { config } = this.engine;
    return {
      memoryLimitBytes: config.memoryLimitBytes,
      maxOutputBytes: config.maxOutputBytes,
      maxPendingToolCalls: config.maxPendingToolCalls,
      maxSnapshotBytes: config.maxSnapshotBytes,
    };
  }

  #onRequest(
    request: HostRequest,
    inflight: InflightCalls,
    ready: ReadyQueue,
    yieldIds: Set<string>,
    parent: { toolCallId: string; tool: "exec" | "wait"; codeModeRunId: string },
    telemetry: CodeModeTelemetry,
    segmentSignal: AbortSignal,
  ): void {
    if (request.kind === "yield") {
      yieldIds.add(request.requestId);
      return;
    }
    const controller = new AbortController();
    const onRunAbort = () => controller.abort(new Error("The code-mode run was aborted."));
    if (segmentSignal.aborted) onRunAbort();
    else segmentSignal.addEventListener("abort", onRunAbort, { once: true });
    const started = startHostRequest(request, this.#scope, parent, telemetry, controller.signal);
    const { stats } = this.engine;
    if (request.kind === "search") stats.nestedSearches++;
    else if (request.kind === "describe") stats.nestedDescribes++;
    else if (started.toolId) stats.nestedCalls++;
    const outcome = started.outcome.finally(() => segmentSignal.removeEventListener("abort", onRunAbort));
    if (started.toolId === null) {
      void outcome.then((settled) => ready.push(request.requestId, settled));
      return;
    }
    inflight.add(request.requestId, started.toolId, controller, outcome);
  }

  async #settleSegment(
    end: SegmentEnd,
    state: {
      runKey: string;
      inflight: InflightCalls;
      yieldIds: Set<string>;
      telemetry: CodeModeTelemetry;
      startedAt: number;
      claim: ClaimedRun | null;
      call: ControlCall;
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

    const pendingCalls = end.pending
      .filter((request) => request.kind !== "yield")
      .map((request) => {
        const call = inflight.get(request.requestId);
        return {
          callId: request.requestId,
          toolId: call?.toolId ?? request.kind,
          startedAt: call?.startedAt ?? new Date().toISOString(),
          ...(call?.outcome ? { outcome: call.outcome as never } : {}),
        };
      });
    const yieldRequestIds = end.pending.filter((request) => request.kind === "yield").map((r) => r.requestId);
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
    try {
      const stored = claim
        ? await store.resuspend(claim, payload)
        : await store.suspend({
            ...payload,
            scope: { ...this.#runScope, toolCallId: state.call.toolCallId },
          });
      runId = stored.runId;
      telemetry.snapshotEvents.push({ event: "stored", runId, bytes: stored.bytes });
    } catch (error) {
      engine.inflight.delete(state.runKey);
      inflight.abortAll("The code-mode run could not be stored.");
      if (claim) await store.finish(claim, "failed").catch(() => {});
      return this.#failure(error, telemetry, state.startedAt);
    }
    inflight.storedAs(store, runId);
    return {
      status: "waiting",
      runId,
      reason: end.reason,
      ...(pendingCalls.length
        ? {
            pendingToolCalls: pendingCalls.map(({ callId, toolId, startedAt }) => ({
              callId,
              toolId,
              startedAt,
            })),
          }
        : {}),
      ...(end.output.length ? { output: end.output } : {}),
      telemetry,
    };
  }
}

export type { RunContext };
