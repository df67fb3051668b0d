import { buildToolCatalog, toolsAllowedBy } from "@codecell/catalog";
import {
  CodeModeError,
  type JsonValue,
  type ResolvedCodeModeConfig,
  resolveCodeModeConfig,
  type TrajectoryExport,
} from "@codecell/contract";
import { createCodeModeNamespaceRuntime } from "@codecell/namespaces";
import { createSandboxPool, type SandboxPool } from "@codecell/sandbox";
import { openSnapshotStore, type SettleResult, type SnapshotStore } from "@codecell/snapshot-store";
import { CellStore, cellStoreScope } from "./cell-store.js";
import { EngineTypecheck } from "./cell-typecheck.js";
import type { EngineShared } from "./engine-shared.js";
import { renderVisibleDeclarations } from "./guest-surface.js";
import { inactiveRun } from "./inactive-run.js";
import type { InflightCalls } from "./inflight-calls.js";
import { codeModeModelTools } from "./model-surface.js";
import { ActiveRun } from "./prepared-run.js";
import type { TracingOptions } from "./tracing.js";
import { TrajectoryRecorder } from "./trajectory.js";
import type {
  CodeModeEngineOptions,
  DebugFields,
  EngineObserver,
  EngineStats,
  ModelTool,
  PreparedRun,
  PrepareRunOptions,
  RunContext,
} from "./types.js";

function isResolvedConfig(value: unknown): value is ResolvedCodeModeConfig {
  return (
    typeof value === "object" && value !== null && Array.isArray((value as { clamped?: unknown }).clamped)
  );
}

function debugSink(
  option: CodeModeEngineOptions["debug"],
): ((line: string, fields?: DebugFields) => void) | null {
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
  readonly #debug: ((line: string, fields?: DebugFields) => void) | null;
  readonly #inflight = new Map<string, InflightCalls>();
  readonly #typecheck: EngineTypecheck;
  readonly #cellStore: CellStore;
  readonly #ownsPool: boolean;
  readonly #ownsStore: boolean;
  #pool: SandboxPool | undefined;
  readonly #snapshotSecret: string | undefined;
  readonly #observer: EngineObserver | null;
  readonly #tracing: TracingOptions;
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
    this.#typecheck = new EngineTypecheck(this.config.typecheckTimeoutMs, this.config.typecheckBudgetMs);
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
            this.#debug?.(`snapshot ${event.event}${event.reason ? ` (${event.reason})` : ""}`, {
              runId: event.runId,
            });
          },
        });
    this.#cellStore = new CellStore(this.store, this.config);
    this.#trajectory = new TrajectoryRecorder({
      ...(options.maxTrajectoryEntries !== undefined
        ? { maxEntriesPerSession: options.maxTrajectoryEntries }
        : {}),
      ...options.trajectory,
    });
    this.#redactInput = options.redactInput ?? ((_toolId, input) => input);
    this.#snapshotSecret = options.snapshotSecret;
    refuseRemovedSandboxOption(options);
    this.#observer = options.observer ?? null;
    this.#tracing = { ...options.tracing };
    this.#debug = debugSink(options.debug);
  }

  get pool(): SandboxPool {
    return this.#startPool();
  }

  #startPool(): SandboxPool {
    this.#pool ??= createSandboxPool({
      ...(this.#snapshotSecret ? { snapshotSecret: this.#snapshotSecret } : {}),
    });
    return this.#pool;
  }

  /**
   * Starts the sandbox now (its first worker thread and QuickJS's wasm compile) instead of on the first
   * exec, so a host that knows cells are coming lets the worker boot on another core while it does the
   * rest of its start-up (the gateway: before it answers initialize and tools/list). Does nothing when
   * code mode is disabled or the pool is already there; the pool is otherwise created lazily.
   */
  warmUp(): void {
    if (this.config.enabled) this.#startPool();
    // With typecheck on, the checker's thread loads the compiler meanwhile too (never with it off). A
    // warm-up that fails is a head start lost: the first checked cell loads the checker again and reports
    // its failure there.
    if (this.config.enabled && this.config.typecheck !== "off") void this.#typecheck.warmUp().catch(() => {});
  }

  /** Decides code mode for one agent run (the spec's activation order) and returns its surface. */
  prepareRun(options: PrepareRunOptions): PreparedRun {
    this.stats.runsPrepared++;
    // What passes through is what policy leaves, never more: a host that shows modelTools as they come
    // must not expose a denied tool, nor any tool on a run that disabled them.
    const passthrough = (
      reason: "disabled" | "no_tools",
      tools: readonly PrepareRunOptions["tools"][number][],
    ): PreparedRun => {
      this.#debug?.(`activation: ${reason}; ${tools.length} tools passed through unchanged`, {
        sessionId: options.context.sessionId,
      });
      return inactiveRun(reason, tools.map(toModelTool));
    };
    if (options.disableTools === true) {
      return passthrough(this.config.enabled ? "no_tools" : "disabled", []);
    }
    const allowed = toolsAllowedBy(options.tools, { allow: options.allow, deny: options.deny });
    if (!this.config.enabled) return passthrough("disabled", allowed);
    if (allowed.length === 0) return passthrough("no_tools", []);

    // Policy first: the catalog holds only what allow/deny leave.
    const catalog = buildToolCatalog([...options.tools], {
      allow: options.allow,
      deny: options.deny,
      searchDefaultLimit: this.config.searchDefaultLimit,
      maxSearchLimit: this.config.maxSearchLimit,
    });
    // Activation needs tools that are active for the run after policy: `deny: ["*"]` or an allow list
    // that matches nothing leaves no catalog, and exec/wait over nothing would only mislead the model.
    // What policy left (directOnly tools, if any) passes through.
    if (catalog.entries.length === 0) return passthrough("no_tools", catalog.directOnly);
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
        typecheck: this.config.typecheck,
        images: this.config.images,
      }),
      ...catalog.directOnly.map(toModelTool),
    ];
    this.stats.activeRuns++;
    this.#debug?.(
      `activation: active; model sees ${modelTools.map((tool) => tool.name).join(", ")}; catalog ${catalog.entries.length} tools ${JSON.stringify(catalog.countsBySource)}; mcp servers ${declarations.servers.length}; namespaces ${namespaces.namespaces.map((ns) => ns.globalName).join(", ") || "none"}`,
      { sessionId: options.context.sessionId },
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

  /** The session is over: its suspended runs are deleted, its nested calls cancelled, its trajectory freed. */
  async endSession(sessionId: string): Promise<number> {
    this.#trajectory.forget(sessionId);
    await this.abort({ sessionId }, "session_ended");
    return (await this.store).endSession({ sessionId });
  }

  /**
   * A conversation is over: the values its cells stored (`store`) are dropped when the store does not
   * outlive the process (memory); on a durable store they stay until their TTL, so a client that comes
   * back to the conversation after a restart finds them. True when values were dropped.
   */
  async endStoredValues(context: Pick<RunContext, "agentId" | "sessionKey" | "sessionId">): Promise<boolean> {
    const store = await this.store;
    if (store.backend.durable) return false;
    await this.#cellStore.clear(cellStoreScope(context));
    return true;
  }

  /**
   * Frees one session's trajectory and nothing else: for hosts whose suspended runs outlive the client
   * session that started them (the gateway, where another session of the same owner may wait on them).
   */
  forgetTrajectory(sessionId: string): boolean {
    return this.#trajectory.forget(sessionId);
  }

  /**
   * Gives the outcome of a nested call that its executor handed out (NestedToolCall.handOut) to the
   * suspended run, wherever it runs next: the store keeps it until the `wait` that resumes the run. A
   * failure reaches the guest as a catchable error with code `nested_tool_failed`. The caller checks
   * that the run is the one its principal owns; the first outcome of a call wins.
   */
  async settleHandedOutCall(
    runId: string,
    callId: string,
    outcome: { ok: true; value: JsonValue } | { ok: false; message: string },
  ): Promise<SettleResult> {
    const store = await this.store;
    return store.settleCall(
      runId,
      callId,
      outcome.ok
        ? outcome
        : { ok: false, error: { name: "Error", message: outcome.message, code: "nested_tool_failed" } },
    );
  }

  /**
   * Nested calls still running in this process, those of suspended runs included, and how many runs
   * they belong to. A run resumed and finished elsewhere (another replica), expired or aborted lets go
   * of its entry once its calls settle here.
   */
  callsInFlight(): { runs: number; calls: number } {
    let calls = 0;
    for (const run of this.#inflight.values()) calls += run.size;
    return { runs: this.#inflight.size, calls };
  }

  /**
   * Control calls with the nested calls under them, as JSON for transcript persistence. With
   * `sessionId` only that session's log is read; `codeModeRunId` and `parentToolCallId` narrow it.
   */
  exportTrajectory(filter?: {
    sessionId?: string;
    parentToolCallId?: string;
    codeModeRunId?: string;
  }): TrajectoryExport {
    return this.#trajectory.export(filter);
  }

  /** The sandbox pool's workers, busy and in all, or null while no pool was started (it starts lazily). */
  sandboxStats(): { workers: number; busyWorkers: number } | null {
    if (this.#pool === undefined) return null;
    const { workers, busyWorkers } = this.#pool.stats();
    return { workers, busyWorkers };
  }

  /** Bytes and sessions the trajectory holds now (what its caps count). */
  get trajectoryStats(): { sessions: number; bytes: number } {
    return { sessions: this.#trajectory.sessionCount, bytes: this.#trajectory.totalBytes };
  }

  async close(): Promise<void> {
    for (const calls of this.#inflight.values()) calls.abortAll("engine closed");
    this.#inflight.clear();
    this.#trajectory.clear();
    await this.#typecheck.close();
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
      observer: this.#observer,
      tracing: this.#tracing,
      typecheck: this.#typecheck,
      cellStore: this.#cellStore,
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

export function createCodeModeEngine(options: CodeModeEngineOptions): CodeModeEngine {
  return new CodeModeEngine(options);
}

function toModelTool(tool: { name: string; description: string; parameters: unknown }): ModelTool {
  return { name: tool.name, description: tool.description, inputSchema: tool.parameters };
}

export type { RunContext };

/**
 * The `sandbox: { thread }` option chose between worker threads and the host's own thread; cells always
 * run on worker threads now. A host written for it is told so rather than having it silently ignored.
 */
function refuseRemovedSandboxOption(options: CodeModeEngineOptions): void {
  const sandbox = (options as { sandbox?: { thread?: unknown } }).sandbox;
  if (sandbox === undefined || (Object.keys(sandbox).length === 1 && sandbox.thread === "worker")) return;
  throw new CodeModeError(
    "invalid_input",
    `The engine option sandbox was removed: cells always run on worker threads. Drop sandbox: ${JSON.stringify(sandbox)} from the options.`,
  );
}
