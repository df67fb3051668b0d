import type {
  CodeModeResult,
  HostTool,
  JsonValue,
  ResolvedCodeModeConfig,
  SnapshotEvent,
  TrajectoryEntry,
} from "@codecell/contract";
import type { McpServerDescription } from "@codecell/mcp-declarations";
import type { SandboxPool } from "@codecell/sandbox";
import type { SnapshotStore } from "@codecell/snapshot-store";
import type { TracingOptions } from "./tracing.js";
import type { TrajectoryLimits } from "./trajectory.js";

/** Who a run belongs to and what it may do: handed to every nested call unchanged. */
export type RunContext = {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  /** The host's agent run (one user turn and its model calls). */
  runId: string;
  sender?: string;
  channel?: string;
  /** Host policies, passed through to the executor as they are. */
  sandboxPolicy?: JsonValue;
  approvalPolicy?: JsonValue;
  /** Host configuration for namespaces' `createScope`. */
  config?: unknown;
  /** Aborts the whole agent run: live cells stop, waiting runs are aborted. */
  signal?: AbortSignal;
};

/** Progress a nested tool reports while it runs: an MCP server's progress notification, a plugin's update. */
export type ToolProgress = { progress: number; total?: number; message?: string };

/**
 * What the host hears while one exec or wait call runs ("streaming updates where available"): nested
 * calls started and settled, and the progress nested tools report. Sent only while the call runs.
 */
export type RunProgress =
  | { kind: "calls"; started: number; settled: number; pending: number }
  | ({ kind: "tool"; toolId: string; callId: string } & ToolProgress);

/** How guest code reached a nested tool (`tools.call` includes the `tools.<name>` shortcuts). */
export type NestedCallVia = "tools.call" | "mcp" | "namespace";

/** How a nested call reached the host, for metrics: a tool call, or a cell's `store`/`load`. */
export type NestedCallEventVia = NestedCallVia | "store";

/** One nested tool call, as the host's executor receives it. */
export type NestedToolCall = {
  /** Exact catalog id, e.g. `core:host:read_file`. */
  toolId: string;
  tool: HostTool;
  input: JsonValue;
  via: NestedCallVia;
  /** The code-mode control call this nested call runs under. */
  parent: { toolCallId: string; tool: "exec" | "wait"; codeModeRunId: string };
  context: RunContext;
  /**
   * Aborted when the run is aborted or ends before the call does. Made the first time it is read (an
   * executor that never looks at it costs no AbortController), already aborted if the call was.
   */
  readonly signal: AbortSignal;
  /** True once the call is cancelled; reading it makes no `AbortSignal` (a cheap check before work starts). */
  readonly aborted: boolean;
  /** Adds a line to this call's trajectory entry, e.g. "approved by the user". */
  note(text: string): void;
  /** Reports the tool's progress (a downstream server's notifications, a plugin's updates) to the host. */
  progress(update: ToolProgress): void;
  /** The call's id inside its code-mode run, as `pendingToolCalls[].callId` of a waiting result names it. */
  readonly callId: string;
  /**
   * Hands the call out of this host: something outside the process (the client of an agent endpoint)
   * answers it. The run suspends as soon as the cell has nothing else ready, instead of at the exec
   * deadline, and the waiting result lists the call in `pendingToolCalls`. From then on the call is not
   * the executor's: what `callTool` returns is ignored, the call leaves the in-flight table (no slot, no
   * lease, never reported lost), and its outcome comes only from `CodeModeEngine.settleHandedOutCall`,
   * which must be called before the `wait` that resumes the run.
   */
  handOut(): void;
};

export type McpServerRequest = {
  server: string;
  op: "resources.list" | "resources.read" | "prompts.list" | "prompts.get";
  args: JsonValue[];
  context: RunContext;
  signal: AbortSignal;
};

/**
 * The host's normal tool path: policy, approvals, `before_tool_call` hooks, streaming, audit. Code mode
 * never runs a tool itself; every nested call goes through here. Throwing fails the nested call (the
 * guest sees a catchable error) with code `nested_tool_failed` and the thrown message, whatever the error's
 * own code: codes are the runtime's (`aborted` when the run cancelled the call).
 */
export interface ToolExecutor {
  /**
   * The call's result, or a promise of it. A tool that answers at once may return the value itself (or
   * throw): the guest gets it without a promise made for the call.
   */
  callTool(call: NestedToolCall): Promise<unknown> | unknown;
  /** MCP resources and prompts, for `MCP.<server>.resources/prompts`; absent: those calls fail. */
  mcpRequest?(request: McpServerRequest): Promise<unknown>;
}

/** A tool definition as sent to the model. */
export type ModelTool = { name: string; description: string; inputSchema: unknown };

export type PrepareRunOptions = {
  /** The run's effective tools from all four sources, before code mode (and before policy). */
  tools: readonly HostTool[];
  /** Policy: ids or names with `*` globs. An empty allow list means "no tools". */
  allow?: readonly string[];
  deny?: readonly string[];
  /** A run that deliberately has no tools (a raw model call). */
  disableTools?: boolean;
  /** Connected MCP servers (tools/list answers), for the `MCP` namespace and the `API` files. */
  mcpServers?: readonly McpServerDescription[];
  context: RunContext;
  executor: ToolExecutor;
};

/** The identity of one model tool call of exec or wait. */
export type ControlCall = {
  toolCallId: string;
  /**
   * Cancels this call (the client cancelled its request or went away): the cell stops, every nested
   * call it has in flight is aborted, and the run ends `failed` with code `aborted`; a run resumed by
   * `wait` is deleted. Nothing the cell would have done next happens.
   */
  signal?: AbortSignal;
  /** Hears the call's progress while it runs (see `RunProgress`). */
  onProgress?: (event: RunProgress) => void;
  /**
   * The host's hooks on an exec call itself (the model's outer call, not the cell's nested calls): given
   * the model's input and its hook metadata (`toolKind: "code_mode_exec"`, `toolInputKind`), returns the
   * input to run (the same, or a trusted rewrite), or throws to block it: the exec then fails with the
   * error's code (a `CodeModeError`) and message, and nothing runs. Ignored by wait.
   */
  beforeExec?: (input: unknown, metadata: ExecHookMetadata) => unknown;
};

/**
 * What a debug line is about, where it is about one: the run id the model was given, the run context's
 * session and the exec/wait call. A host's structured log puts them in fields of their own.
 */
export type DebugFields = { runId?: string; sessionId?: string; toolCallId?: string };

/** Metadata a host's hooks see for an outer exec call, so policy can tell it from a shell exec. */
export type ExecHookMetadata = {
  toolKind: "code_mode_exec";
  toolInputKind?: "javascript" | "typescript";
};

export interface PreparedRun {
  /** True when code mode took over this run's tool surface. */
  readonly active: boolean;
  /** Why code mode is or is not active, for logs. */
  readonly reason: "disabled" | "no_tools" | "active";
  /** What the model sees: exec and wait (plus directOnly tools), or the tools unchanged. */
  readonly modelTools: readonly ModelTool[];
  exec(input: unknown, call: ControlCall): Promise<CodeModeResult>;
  wait(input: unknown, call: ControlCall): Promise<CodeModeResult>;
  hookMetadata(input: unknown): ExecHookMetadata;
}

export type CodeModeEngineOptions = {
  /** `tools.codeMode` as written by a user (boolean or object), or an already resolved config. */
  config: unknown;
  /** Shared sandbox pool; default one is created lazily on the first active run. */
  pool?: SandboxPool;
  /**
   * Signs the default pool's snapshots with HMAC-SHA-256 (see `loadSnapshotKey` in
   * `@codecell/snapshot-store` for where a host gets one). Without it snapshots carry an unkeyed
   * SHA-256, which catches corruption but not a forger who can write the store. Ignored with `pool`.
   */
  snapshotSecret?: string;
  /** Where suspended runs live; default an in-memory store. */
  store?: SnapshotStore;
  /** Redacts a nested call's input before it is written to the trajectory or debug log. */
  redactInput?: (toolId: string, input: JsonValue) => JsonValue;
  /**
   * Debug lines (activation, surface, counts, one per exec and wait) go here, with what each is about
   * (`fields`); default stderr when CODECELL_DEBUG_CODE_MODE=1.
   */
  debug?: (line: string, fields?: DebugFields) => void;
  /** Largest number of trajectory entries kept per session (oldest dropped first). Default 10,000. */
  maxTrajectoryEntries?: number;
  /**
   * Bounds of the trajectory, kept per session: bytes per session (default 2 MiB), bytes of one input or
   * exec cell (default 32 KiB; longer ones become a `$truncated` marker with a preview), entries per
   * session, and bytes over all sessions (default 64 MiB; the sessions idle longest are freed first).
   */
  trajectory?: Partial<TrajectoryLimits>;
  /** Metrics hooks (see EngineObserver). */
  observer?: EngineObserver;
  /**
   * What the OpenTelemetry spans carry beyond ids, counts and outcomes (they are made only when the
   * host registered a tracer provider). Inputs go through `redactInput` first.
   */
  tracing?: TracingOptions;
};

/** One exec or wait call as it ended, for a host's metrics. */
export type ControlCallEvent = {
  tool: "exec" | "wait";
  status: CodeModeResult["status"];
  /** The failure's code (`guest_error` for a cell that threw without one). */
  code?: string;
  durationMs: number;
  /** Nested calls the cell made in this call. */
  nestedCalls: number;
  /** The code-mode run (absent when a wait named none it could read). */
  runId?: string;
  /** The run owner's session (`RunContext.sessionId`). */
  sessionId: string;
  /** The trace the call's span belongs to, when it was traced. */
  traceId?: string;
};

/** One nested call as it ended (a tool call or an MCP resources/prompts request). */
export type NestedCallEvent = {
  toolId: string;
  /** The tool's source (`core`, `plugin`, `mcp`, `client`). */
  source: string;
  via: NestedCallEventVia;
  outcome: "completed" | "failed" | "aborted";
  durationMs: number;
};

/** A suspended run written to the store, or claimed back from it. */
export type SnapshotIoEvent = { kind: "suspend"; bytes: number } | { kind: "restore"; bytes: number };

/**
 * Hooks a host gives the engine to keep its own metrics (the gateway's Prometheus and OTel
 * instruments). Each is called synchronously where the event happens; one that throws is ignored.
 */
export type EngineObserver = {
  controlEnded?(event: ControlCallEvent): void;
  nestedCallEnded?(event: NestedCallEvent): void;
  snapshot?(event: SnapshotIoEvent): void;
};

export type EngineStats = {
  runsPrepared: number;
  activeRuns: number;
  execCount: number;
  waitCount: number;
  results: { completed: number; waiting: number; failed: number };
  failuresByCode: Record<string, number>;
  nestedCalls: number;
  nestedSearches: number;
  nestedDescribes: number;
  /** Lifecycle events of the engine's own store (a store the host passes in reports to the host's listener). */
  snapshotEvents: Record<SnapshotEvent, number>;
};

export type { ResolvedCodeModeConfig, TrajectoryEntry, TrajectoryLimits };
