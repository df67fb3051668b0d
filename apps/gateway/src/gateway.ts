import { buildToolCatalog, type ToolCatalog, toolsAllowedBy } from "@codecell/catalog";
import { type BeforeToolCallEvent, CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import {
  type CodeModeEngine,
  createCodeModeEngine,
  type DebugFields,
  type EngineObserver,
  type ExecHookMetadata,
  type PreparedRun,
  type RunContext,
  type ToolExecutor,
  type TrajectoryExport,
} from "@codecell/engine";
import { createMcpConnector, type McpConnector } from "@codecell/mcp-connector";
import type { SnapshotStore } from "@codecell/snapshot-store";
import type { Meter } from "@opentelemetry/api";
import type { GatewayConfig } from "./config/load-config.js";
import { type CoreTool, createCoreTools, SHELL_TOOL_ID } from "./core-tools/core-tools.js";
import { CODE_MODE_DEBUG_TAG, debugLine, debugSwitches } from "./debug-switches.js";
import { log, logFormat, operatorLine } from "./logger.js";
import type { ApprovalClient } from "./mcp/approvals.js";
import { DeferredApprovals } from "./mcp/deferred-approvals.js";
import { NestedCallRequest } from "./mcp/nested-call-request.js";
import { compilePatterns } from "./mcp/tool-patterns.js";
import { type LoadedPlugin, loadPlugin } from "./plugins/load-plugins.js";
import { LOCAL_PRINCIPAL, ownerContext, type RunOwner } from "./sessions/run-owner.js";
import { GatewaySession } from "./sessions/session.js";
import type { SessionHost, ToolCallRequest } from "./sessions/session-host.js";
import { openGatewayStore } from "./store/open-store.js";
import type { GatewayMetrics } from "./telemetry/gateway-metrics.js";
import type { RequestTracer } from "./telemetry/request-tracing.js";
import { mcpRequest } from "./tools/mcp-operations.js";
import { ToolRunner } from "./tools/tool-runner.js";

export type GatewayOptions = {
  /** Operator log lines (startup, diagnostics); default stderr. */
  log?: (line: string) => void;
  /** Start downstream MCP servers; `check`-style callers may skip it. Default true. */
  connectMcp?: boolean;
  /**
   * How long start waits for the MCP servers; those still starting are added later (tools/list_changed
   * to every session). Default: wait until each has connected or failed within its deadline.
   */
  mcpWaitMs?: number;
  /**
   * Log a warning for each MCP server that failed to start. Default true; `check` reports them as its
   * own problems instead, so each is said once.
   */
  warnFailedServers?: boolean;
};

export type { ToolCallRequest } from "./sessions/session-host.js";

function toolIdOf(tool: HostTool): string {
  return `${tool.source}:${tool.owner}:${tool.name}`;
}

/**
 * One running gateway: the engine, the snapshot store, downstream MCP servers, core tools and plugins.
 * Transports open sessions on it; everything else is shared.
 */
export class Gateway implements SessionHost {
  readonly config: GatewayConfig;
  readonly engine: CodeModeEngine;
  readonly store: SnapshotStore;
  readonly connector: McpConnector;
  readonly plugins: readonly LoadedPlugin[];
  readonly coreTools: readonly CoreTool[];
  readonly #runner: ToolRunner;
  readonly #sessions = new Map<string, GatewaySession>();
  readonly #log: (line: string) => void;
  #toolsVersion = 0;
  readonly #toolListeners = new Set<() => void>();
  #closed: Promise<void> | null = null;
  /** Prometheus (and OTel) instruments, once `enableMetrics` made them. */
  #metrics: GatewayMetrics | null = null;
  /**
   * What the engine reports to. The per-call hooks are set only once metrics are enabled: without them
   * the engine builds no event for a nested call (a stdio gateway without OTLP pays nothing per call).
   */
  readonly #observer: EngineObserver = {};

  private constructor(
    config: GatewayConfig,
    parts: {
      store: SnapshotStore;
      connector: McpConnector;
      plugins: LoadedPlugin[];
      log: (line: string) => void;
      snapshotSecret: string;
    },
  ) {
    this.config = config;
    this.store = parts.store;
    this.connector = parts.connector;
    this.plugins = parts.plugins;
    this.coreTools = createCoreTools(config.workspace, config.workspaceLimits);
    this.#log = parts.log;
    this.#runner = new ToolRunner({
      coreTools: this.coreTools,
      plugins: this.plugins,
      connector: this.connector,
      needsApproval: compilePatterns(config.approval),
    });
    this.engine = createCodeModeEngine({
      config: config.codeMode,
      store: parts.store,
      snapshotSecret: parts.snapshotSecret,
      ...(config.telemetry
        ? {
            tracing: {
              recordInputs: config.telemetry.recordInputs,
              recordOutputs: config.telemetry.recordOutputs,
            },
          }
        : {}),
      // The engine's lines (activation, one per exec and wait) carry the switch's tag and, in JSON, what
      // they are about: the run id, the session, the control call.
      ...(debugSwitches().codeMode
        ? {
            debug: (line: string, fields?: DebugFields) =>
              log(
                "debug",
                line,
                {
                  tag: CODE_MODE_DEBUG_TAG,
                  runId: fields?.runId,
                  session: fields?.sessionId,
                  toolCallId: fields?.toolCallId,
                },
                `[codecell] ${line}`,
              ),
          }
        : {}),
      observer: this.#observer,
    });
    this.#observer.controlEnded = (event) => {
      this.#metrics?.controlEnded(event);
      // A JSON log is for machines: one record per exec and wait (the human format stays quiet).
      if (logFormat() === "json") {
        log("info", `${event.tool} ${event.status}`, {
          runId: event.runId,
          session: event.sessionId,
          traceId: event.traceId,
          status: event.status,
          code: event.code,
          durationMs: event.durationMs,
          nestedCalls: event.nestedCalls,
        });
      }
    };
    this.connector.onChange(({ server, reason }) => {
      // A server that failed to start was never declared: the model's tools did not change.
      if (reason !== "failed") {
        this.#toolsVersion++;
        for (const listener of this.#toolListeners) listener();
      }
      const what = {
        tools_changed: "tool list changed",
        disconnected: "disconnected",
        connected: "connected after the gateway started serving; its tools are added",
        failed: `failed to start: ${this.connector.status().find((s) => s.server === server)?.lastError ?? "see above"}`,
      }[reason];
      this.#log(`${reason === "failed" ? "warning: " : ""}MCP server "${server}": ${what}`);
    });
  }

  static async start(config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> {
    const log = options.log ?? ((line: string) => operatorLine(line));
    const { store, snapshotSecret } = await openGatewayStore(config);
    const connector = createMcpConnector(config.mcpServers, { clientName: "codecell-gateway" });
    const plugins: LoadedPlugin[] = [];
    try {
      const taken = new Set<string>();
      for (const spec of config.plugins) {
        const loaded = await loadPlugin(spec, config.configDir, taken);
        taken.add(loaded.plugin.id);
        plugins.push(loaded);
      }
      if (options.connectMcp !== false) {
        await connector.start(options.mcpWaitMs !== undefined ? { waitMs: options.mcpWaitMs } : {});
        if (options.warnFailedServers !== false)
          for (const diagnostic of connector.diagnostics) log(`warning: ${diagnostic.message}`);
      }
    } catch (error) {
      // Undoing a start that failed: its error is what is thrown, and a part that cannot be stopped
      // either has nothing to add to it.
      for (const plugin of plugins) await plugin.unload().catch(() => {});
      await connector.close().catch(() => {});
      await store.close().catch(() => {});
      throw error;
    }
    return new Gateway(config, {
      store,
      connector,
      plugins,
      log,
      snapshotSecret,
    });
  }

  /**
   * Starts counting for `/metrics` (prom-client, loaded now) and, with a meter, for OTLP metrics too.
   * Until it is called nothing is measured and prom-client is not loaded (a stdio gateway without OTLP).
   */
  async enableMetrics(meter: Meter | null = null): Promise<GatewayMetrics> {
    if (this.#metrics === null) {
      const { GatewayMetrics } = await import("./telemetry/gateway-metrics.js");
      // Another call may have made them while the module loaded.
      if (this.#metrics !== null) return this.#metrics;
      const metrics = new GatewayMetrics(this, meter);
      this.#metrics = metrics;
      this.#observer.nestedCallEnded = (event) => metrics.nestedCallEnded(event);
      this.#observer.snapshot = (event) => metrics.snapshot(event);
    }
    return this.#metrics;
  }

  /** Wraps incoming tool calls in server spans (set by the telemetry set-up; null: not traced). */
  traceRequest: RequestTracer | null = null;

  /** The instruments, or null before `enableMetrics`. */
  get metrics(): GatewayMetrics | null {
    return this.#metrics;
  }

  /** Bumped when a downstream server changes its tools, so sessions re-prepare their run. */
  get toolsVersion(): number {
    return this.#toolsVersion;
  }

  /** Called when a downstream server changed its tools; returns the unsubscribe function. */
  onToolsChanged(listener: () => void): () => void {
    this.#toolListeners.add(listener);
    return () => this.#toolListeners.delete(listener);
  }

  /** Every tool from the three sources the gateway has, before policy. */
  hostTools(): HostTool[] {
    const core = this.coreTools.map(({ execute: _execute, ...tool }) => tool);
    return [...core, ...this.plugins.flatMap((plugin) => plugin.hostTools), ...this.connector.hostTools()];
  }

  /**
   * Policy as the config says, plus one rule of the gateway: the shell tool is off unless `tools.allow`
   * names its exact id (a glob such as `core:*` is not enough).
   */
  policy(): { allow: string[] | undefined; deny: string[] } {
    const allow = this.config.allow;
    const deny = [...(this.config.deny ?? [])];
    if (!allow?.includes(SHELL_TOOL_ID)) deny.push(SHELL_TOOL_ID);
    return { allow, deny };
  }

  /** The catalog a session would get now, for `codecell catalog` and tests. */
  catalog(): ToolCatalog {
    return buildToolCatalog(this.hostTools(), {
      ...this.policy(),
      searchDefaultLimit: this.config.codeMode.searchDefaultLimit,
      maxSearchLimit: this.config.codeMode.maxSearchLimit,
    });
  }

  /**
   * Effective tools: the host tools that policy lets through, before code mode (whose catalog leaves out
   * its control tools; with code mode off every allowed tool reaches the client, whatever its name).
   */
  effectiveTools(): HostTool[] {
    return toolsAllowedBy(this.hostTools(), this.policy());
  }

  /**
   * Opens (or returns) the session of one MCP session. `owner` says whose runs it starts; by default the
   * local principal with the session itself as the conversation.
   */
  openSession(
    sessionId: string,
    approvals: ApprovalClient,
    owner: RunOwner = { principal: LOCAL_PRINCIPAL, conversation: sessionId },
  ): GatewaySession {
    if (this.#closed) throw new CodeModeError("runtime_unavailable", "The gateway is shutting down.");
    const existing = this.#sessions.get(sessionId);
    if (existing) return existing;
    const session = new GatewaySession(this, sessionId, approvals, owner);
    this.#sessions.set(sessionId, session);
    return session;
  }

  get sessionCount(): number {
    return this.#sessions.size;
  }

  sessionEnded(sessionId: string): void {
    const ended = this.#sessions.get(sessionId);
    this.#sessions.delete(sessionId);
    if (!ended) return;
    // The trajectory is kept per run owner (several MCP sessions may share one through a conversation
    // header); it is freed when the owner's last open session ends. Waiting runs are not touched.
    const owner = ownerContext(ended.owner).sessionId;
    for (const session of this.#sessions.values()) {
      if (ownerContext(session.owner).sessionId === owner) return;
    }
    this.engine.forgetTrajectory(owner);
    // On a store that ends with the process, values the owner's cells stored (store()) end with its
    // last session too; a durable store keeps them for a client that comes back, until their TTL. A
    // stateless client has no last session: its values wait for their TTL on every store.
    if (ended.owner.stateless) return;
    void this.engine.endStoredValues(ownerContext(ended.owner)).catch(() => {});
  }

  /** A run over the effective tools, for one owner's context; nested calls come back through runTool. */
  prepareRun(
    context: RunContext,
    sessionId: string,
    approvals: ApprovalClient,
  ): { run: PreparedRun; tools: readonly HostTool[] } {
    const tools = this.effectiveTools();
    const { allow, deny } = this.policy();
    const run = this.engine.prepareRun({
      tools,
      ...(allow ? { allow } : {}),
      deny,
      mcpServers: this.connector.describeServers(),
      context,
      executor: this.executorFor(sessionId, approvals),
    });
    return { run, tools };
  }

  exportTrajectory(ownerSessionId: string): TrajectoryExport {
    return this.engine.exportTrajectory({ sessionId: ownerSessionId });
  }

  /** The executor a session hands the engine: every nested call comes through here. */
  executorFor(sessionId: string, approvals: ApprovalClient): ToolExecutor {
    return {
      callTool: (call) =>
        this.#traced(
          call.toolId,
          { runId: call.parent.codeModeRunId, session: call.context.sessionId },
          new NestedCallRequest(call, sessionId, approvals),
        ),
      mcpRequest: (request) => mcpRequest(this.connector, request),
    };
  }

  /** `CODECELL_DEBUG_CODE_MODE=1`: one stderr line per nested call, with its outcome and time. */
  async #traced(
    toolId: string,
    about: { runId: string; session: string },
    request: ToolCallRequest,
  ): Promise<unknown> {
    if (!debugSwitches().codeMode) return this.runTool(request);
    const started = Date.now();
    const { runId } = about;
    try {
      const value = await this.runTool(request);
      debugLine(
        CODE_MODE_DEBUG_TAG,
        `nested call ${toolId} (run ${runId}): ok in ${Date.now() - started} ms`,
        undefined,
        about,
      );
      return value;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      debugLine(
        CODE_MODE_DEBUG_TAG,
        `nested call ${toolId} (run ${runId}): failed${typeof code === "string" ? ` (${code})` : ""} in ${Date.now() - started} ms`,
        undefined,
        about,
      );
      throw error;
    }
  }

  /** Runs one tool from any source, after policy: hooks, approval, then the tool (see `ToolRunner`). */
  runTool(request: ToolCallRequest): Promise<unknown> {
    return this.#runner.runTool(request);
  }

  /** Runs a call whose approval was deferred, once the client approved it (see deferred-approvals.ts). */
  runApprovedTool(request: ToolCallRequest, input: JsonValue): Promise<unknown> {
    return this.#runner.runApproved(request, input);
  }

  /** Approvals left to the retries of 2026-07-28 clients, which cannot be asked by a request. */
  readonly deferredApprovals = new DeferredApprovals();

  /** The plugins' `before_tool_call` hooks on the model's own code-mode exec call (see `ToolRunner`). */
  beforeExec(
    input: unknown,
    metadata: ExecHookMetadata,
    sessionId: string,
    run: BeforeToolCallEvent["run"],
  ): Promise<unknown> {
    return this.#runner.beforeExec(input, metadata, sessionId, run);
  }

  toolIdOf(tool: HostTool): string {
    return toolIdOf(tool);
  }

  /**
   * Stops cleanly: sessions' live calls are cancelled (their waiting runs stay in a durable store),
   * downstream servers are closed, plugins unloaded, the store flushed and closed.
   */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      for (const session of [...this.#sessions.values()]) session.end();
      this.#sessions.clear();
      await this.engine.close().catch((error) => this.#log(`engine close failed: ${String(error)}`));
      await this.connector.close().catch((error) => this.#log(`MCP close failed: ${String(error)}`));
      // A plugin's unload is its own clean-up; one that fails leaves nothing the gateway could retry.
      for (const plugin of this.plugins) await plugin.unload().catch(() => {});
      await this.store.close().catch((error) => this.#log(`store close failed: ${String(error)}`));
    })();
    return this.#closed;
  }
}
