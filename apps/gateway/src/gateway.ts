import { buildToolCatalog, type ToolCatalog, toolsAllowedBy } from "@codecell/catalog";
import { CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import {
  type CodeModeEngine,
  createCodeModeEngine,
  type DebugFields,
  type EngineObserver,
  EXEC_TOOL_NAME,
  type ExecHookMetadata,
  type McpServerRequest,
  type PreparedRun,
  type RunContext,
  type ToolExecutor,
  type TrajectoryExport,
} from "@codecell/engine";
import { createMcpConnector, type McpConnector } from "@codecell/mcp-connector";
import {
  keyFileFor,
  loadSnapshotKey,
  MemorySnapshotBackend,
  openSnapshotStore,
  RedisSnapshotBackend,
  type SnapshotBackend,
  type SnapshotStore,
  SqliteSnapshotBackend,
} from "@codecell/snapshot-store";
import type { Meter } from "@opentelemetry/api";
import type { GatewayConfig } from "./config/load-config.js";
import { type CoreTool, createCoreTools, SHELL_TOOL_ID } from "./core-tools/core-tools.js";
import { CODE_MODE_DEBUG_TAG, debugLine, debugSwitches } from "./debug-switches.js";
import { log, logFormat, operatorLine } from "./logger.js";
import { type ApprovalClient, requireApproval } from "./mcp/approvals.js";
import { CoreToolCallContext, NestedCallRequest, PluginToolCallContext } from "./mcp/nested-call-request.js";
import { compilePatterns } from "./mcp/tool-patterns.js";
import { type LoadedPlugin, loadPlugin } from "./plugins/load-plugins.js";
import type { BeforeToolCallEvent } from "./plugins/plugin-shape.js";
import { LOCAL_PRINCIPAL, ownerContext, type RunOwner } from "./sessions/run-owner.js";
import { GatewaySession } from "./sessions/session.js";
import type { SessionHost, ToolCallRequest } from "./sessions/session-host.js";
import type { GatewayMetrics } from "./telemetry/gateway-metrics.js";
import type { RequestTracer } from "./telemetry/request-tracing.js";

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

/** The store's backend as the config names it. */
function snapshotBackend(spec: GatewayConfig["snapshotStore"], snapshotSecret: string): SnapshotBackend {
  switch (spec.kind) {
    case "sqlite":
      // The snapshot key also signs the rest of each row (outcomes, output, host state): a resume
      // trusts them as much as the snapshot.
      return new SqliteSnapshotBackend({ path: spec.path, secret: snapshotSecret });
    case "redis":
      return new RedisSnapshotBackend({
        ...("url" in spec
          ? { url: spec.url }
          : {
              sentinels: spec.sentinels,
              name: spec.name,
              ...(spec.username !== undefined ? { username: spec.username } : {}),
              ...(spec.password !== undefined ? { password: spec.password } : {}),
              ...(spec.db !== undefined ? { db: spec.db } : {}),
              ...(spec.tls !== undefined ? { tls: spec.tls } : {}),
            }),
        secret: spec.secret,
        ...(spec.keyPrefix !== undefined ? { keyPrefix: spec.keyPrefix } : {}),
        ...(spec.replicaLeaseMs !== undefined ? { replicaLeaseMs: spec.replicaLeaseMs } : {}),
      });
    case "memory":
      return new MemorySnapshotBackend();
  }
}

/** A hook's rewritten input, as JSON (a copy, so the hook keeps no handle on what the tool receives). */
function toJsonInput(value: unknown, pluginId: string): JsonValue {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    // A cycle or a BigInt: left undefined, and refused below with the plugin named.
  }
  if (json === undefined) {
    throw new CodeModeError(
      "nested_tool_failed",
      `The before_tool_call hook of plugin "${pluginId}" rewrote the input to something that is not JSON.`,
    );
  }
  return JSON.parse(json) as JsonValue;
}

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
  readonly #needsApproval: (id: string, name: string) => boolean;
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
    this.#needsApproval = compilePatterns(config.approval);
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
    // Snapshots are always signed (HMAC-SHA-256): a durable store's key comes from the config or a
    // 0600 key file generated beside it, so whoever can write the store file alone cannot forge a run.
    // On Redis the config's secret is required, and every replica signs with it, so any replica can
    // restore a snapshot another one took.
    const spec = config.snapshotStore;
    const snapshotSecret = loadSnapshotKey(
      spec.kind === "memory"
        ? { kind: "ephemeral" }
        : spec.kind === "redis" || spec.secret
          ? { kind: "secret", secret: spec.secret as string }
          : { kind: "keyFile", path: keyFileFor(spec.path) },
    );
    const store = await openSnapshotStore({
      backend: snapshotBackend(config.snapshotStore, snapshotSecret),
      ...(config.snapshotStore.maxLiveRuns !== undefined
        ? { maxLiveRuns: config.snapshotStore.maxLiveRuns }
        : {}),
      ...(config.snapshotStore.maxLiveRunsPerPrincipal !== undefined
        ? { maxLiveRunsPerPrincipal: config.snapshotStore.maxLiveRunsPerPrincipal }
        : {}),
      maxSnapshotBytes: config.codeMode.maxSnapshotBytes,
      snapshotTtlSeconds: config.codeMode.snapshotTtlSeconds,
    });
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
      mcpRequest: (request) => this.#mcpRequest(request),
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

  /**
   * Runs one tool from any source. The order, for nested and direct calls alike: policy (the caller's
   * catalog), then the plugins' `before_tool_call` hooks in plugin load order (each sees the input the
   * previous one left, and may block the call or rewrite its input), then approval (here, of the input
   * that will actually run), then the tool. Hook decisions and approvals are noted on the call's
   * trajectory entry.
   */
  async runTool(request: ToolCallRequest): Promise<unknown> {
    const { tool, toolId } = request;
    // Without any before_tool_call hook the input runs as it is, without a trip through the hook loop.
    const input = this.#hasBeforeToolCallHooks() ? await this.#beforeToolCall(request) : request.input;
    if (this.#needsApproval(toolId, tool.name)) {
      await requireApproval(request.approvals, toolId, input, request.signal);
      request.note?.("approved by the user");
    }
    if (request.cancelled ? request.cancelled() : request.signal.aborted)
      throw new CodeModeError("aborted", `The call to ${toolId} was cancelled before it started.`);
    switch (tool.source) {
      case "core": {
        const core = this.coreTools.find((candidate) => candidate.name === tool.name);
        if (!core) break;
        return core.execute(input, new CoreToolCallContext(request));
      }
      case "plugin": {
        const plugin = this.plugins.find((candidate) => candidate.plugin.id === tool.owner);
        const pluginTool = plugin?.tool(tool.name);
        if (!pluginTool) break;
        return pluginTool.execute(input, new PluginToolCallContext(request));
      }
      case "mcp":
        return this.connector.callTool(tool.owner, tool.name, input ?? {}, {
          signal: request.signal,
          ...(request.progress ? { onProgress: request.progress } : {}),
        });
      default:
        break;
    }
    throw new CodeModeError("invalid_input", `The gateway has no tool ${toolId}.`);
  }

  #hasBeforeToolCallHooks(): boolean {
    for (const loaded of this.plugins) if (loaded.plugin.hooks?.before_tool_call) return true;
    return false;
  }

  /** Runs every plugin's `before_tool_call` hook; returns the input to run with, or throws a block. */
  #beforeToolCall(request: ToolCallRequest): Promise<JsonValue> {
    return this.#runBeforeHooks(
      {
        toolId: request.toolId,
        toolName: request.tool.name,
        source: request.tool.source,
        owner: request.tool.owner,
        input: request.input,
        via: request.via ?? "direct",
        sessionId: request.sessionId,
        run: request.run ?? {
          ...ownerContext({ principal: LOCAL_PRINCIPAL, conversation: request.sessionId }),
        },
      },
      "nested_tool_failed",
      request.note,
    );
  }

  /**
   * The plugins' `before_tool_call` hooks on the model's own code-mode exec call (spec: outer exec hook
   * events carry `toolKind: "code_mode_exec"` and `toolInputKind`): the exec input to run, or a throw
   * (`invalid_input`, with the plugin's reason) that fails the exec before anything runs.
   */
  async beforeExec(
    input: unknown,
    metadata: ExecHookMetadata,
    sessionId: string,
    run: BeforeToolCallEvent["run"],
  ): Promise<unknown> {
    if (!this.#hasBeforeToolCallHooks()) return input;
    return this.#runBeforeHooks(
      {
        toolId: EXEC_TOOL_NAME,
        toolName: EXEC_TOOL_NAME,
        source: "code_mode",
        owner: "codecell",
        // What the client sent, as JSON arrived: its exec input is JSON already.
        input: (input ?? null) as JsonValue,
        via: "direct",
        ...metadata,
        sessionId,
        run,
      },
      "invalid_input",
    );
  }

  async #runBeforeHooks(
    event: BeforeToolCallEvent,
    blockCode: "nested_tool_failed" | "invalid_input",
    note?: (text: string) => void,
  ): Promise<JsonValue> {
    let input = event.input;
    for (const loaded of this.plugins) {
      const hook = loaded.plugin.hooks?.before_tool_call;
      if (!hook) continue;
      const pluginId = loaded.plugin.id;
      let decision: unknown;
      try {
        decision = await hook.call(loaded.plugin.hooks, { ...event, input: structuredClone(input) });
      } catch (error) {
        // Fail closed: a hook that breaks cannot wave a call through.
        note?.(`blocked: the before_tool_call hook of plugin "${pluginId}" failed`);
        throw new CodeModeError(
          blockCode,
          `The before_tool_call hook of plugin "${pluginId}" failed (${(error as Error).message}), so ${event.toolId} was not called.`,
        );
      }
      if (decision === undefined || decision === null) continue;
      const answer = decision as { block?: unknown; reason?: unknown; input?: unknown };
      if (answer.block === true) {
        const reason = typeof answer.reason === "string" && answer.reason ? answer.reason : "no reason given";
        note?.(`blocked by the before_tool_call hook of plugin "${pluginId}": ${reason.slice(0, 300)}`);
        throw new CodeModeError(blockCode, `Blocked by plugin "${pluginId}": ${reason}`);
      }
      if ("input" in answer) {
        input = toJsonInput(answer.input, pluginId);
        note?.(`input rewritten by the before_tool_call hook of plugin "${pluginId}"`);
      }
    }
    return input;
  }

  async #mcpRequest(request: McpServerRequest): Promise<unknown> {
    const { server, op, args, signal } = request;
    const first = args[0];
    switch (op) {
      case "resources.list":
        return this.connector.listResources(server, { signal });
      case "resources.read": {
        const uri = typeof first === "string" ? first : (first as { uri?: unknown } | null)?.uri;
        if (typeof uri !== "string") {
          throw new CodeModeError(
            "invalid_input",
            'resources.read needs { uri: "..." } (a URI from resources.list()).',
          );
        }
        return this.connector.readResource(server, { uri }, { signal });
      }
      case "prompts.list":
        return this.connector.listPrompts(server, { signal });
      case "prompts.get": {
        const input = (typeof first === "string" ? { name: first } : first) as {
          name?: unknown;
          arguments?: Record<string, string>;
        } | null;
        if (typeof input?.name !== "string") {
          throw new CodeModeError("invalid_input", 'prompts.get needs { name: "...", arguments?: {...} }.');
        }
        return this.connector.getPrompt(
          server,
          { name: input.name, ...(input.arguments ? { arguments: input.arguments } : {}) },
          { signal },
        );
      }
    }
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
