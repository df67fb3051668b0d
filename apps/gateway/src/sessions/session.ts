import { CodeModeError, type CodeModeResult, type HostTool, type JsonValue } from "@codecell/contract";
import type {
  ControlCall,
  ModelTool,
  PreparedRun,
  RunProgress,
  ToolProgress,
  TrajectoryExport,
} from "@codecell/engine";
import type { ApprovalClient } from "../mcp/approvals.js";
import { linkSignals } from "./linked-signal.js";
import { ownerContext, type RunOwner } from "./run-owner.js";
import type { SessionHost } from "./session-host.js";

/** How a client's exec or wait request reaches the run: its cancellation and its progress listener. */
export type ControlOptions = { signal?: AbortSignal; onProgress?: (event: RunProgress) => void };

/**
 * One MCP session of one run owner. The runs it starts belong to the owner (principal and
 * conversation), not to this session: another MCP session of the same owner may wait on them, and
 * ending this session cancels only the calls it still has open, never a waiting run (the snapshot
 * store's TTL decides when that one goes).
 */
export class GatewaySession {
  readonly sessionId: string;
  readonly owner: RunOwner;
  readonly #host: SessionHost;
  readonly #approvals: ApprovalClient;
  /** Aborted when the session ends: cancels this session's exec, wait and direct calls still open. */
  readonly #abort = new AbortController();
  #run: PreparedRun | null = null;
  #preparedAt = -1;
  #calls = 0;
  #ended = false;
  /** Runs this session was last told are waiting: it holds them until a wait settles them. */
  readonly #waiting = new Set<string>();
  /** Model-facing names of passthrough tools, when code mode is off. */
  #direct = new Map<string, HostTool>();

  constructor(host: SessionHost, sessionId: string, approvals: ApprovalClient, owner: RunOwner) {
    this.#host = host;
    this.sessionId = sessionId;
    this.#approvals = approvals;
    this.owner = owner;
  }

  /** The prepared run, prepared again when a downstream server changed its tools. */
  get run(): PreparedRun {
    if (!this.#run || this.#preparedAt !== this.#host.toolsVersion) {
      this.#preparedAt = this.#host.toolsVersion;
      const { run, tools } = this.#host.prepareRun(ownerContext(this.owner), this.sessionId, this.#approvals);
      this.#run = run;
      this.#direct = new Map();
      if (!run.active) {
        // Passthrough names must be unique on the wire; a later duplicate gets its owner as prefix.
        for (const tool of tools) {
          const name = this.#direct.has(tool.name) ? `${tool.owner}__${tool.name}` : tool.name;
          this.#direct.set(name, tool);
        }
      }
    }
    return this.#run;
  }

  /** What `tools/list` answers: exec and wait, or the effective tools when code mode is off. */
  modelTools(): ModelTool[] {
    const run = this.run;
    if (run.active) return [...run.modelTools];
    return [...this.#direct].map(([name, tool]) => ({
      name,
      description: tool.description,
      inputSchema: tool.parameters,
    }));
  }

  #nextToolCallId(): string {
    return `${this.sessionId}/call-${++this.#calls}`;
  }

  async exec(input: unknown, options: ControlOptions = {}): Promise<CodeModeResult> {
    const result = await this.#control(options, (call) =>
      this.run.exec(input, {
        ...call,
        beforeExec: (execInput, metadata) =>
          this.#host.beforeExec(execInput, metadata, this.sessionId, ownerContext(this.owner)),
      }),
    );
    if (result.status === "waiting") this.#waiting.add(result.runId);
    return result;
  }

  async wait(input: unknown, options: ControlOptions = {}): Promise<CodeModeResult> {
    const result = await this.#control(options, (call) => this.run.wait(input, call));
    const runId = (input as { runId?: unknown } | null)?.runId;
    if (typeof runId === "string" && result.status !== "waiting") this.#waiting.delete(runId);
    return result;
  }

  /**
   * One exec or wait: its own call id, and its signal linked to the session's while it runs (the engine
   * listens to a call's signal only while the call runs; a waiting run's pending calls outlive it).
   */
  #control(
    options: ControlOptions,
    run: (call: ControlCall) => Promise<CodeModeResult>,
  ): Promise<CodeModeResult> {
    return this.#linked(options.signal, (signal) =>
      run({
        toolCallId: this.#nextToolCallId(),
        signal,
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      }),
    );
  }

  /** Runs `call` with `signal` linked to the session's, unlinked when the call ends (see linkSignals). */
  async #linked<T>(signal: AbortSignal | undefined, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const linked = linkSignals(this.#abort.signal, signal);
    try {
      return await call(linked.signal);
    } finally {
      linked.release();
    }
  }

  /** True while a run this session started (or resumed) is waiting for a `wait`: evict it last. */
  get holdsWaitingRun(): boolean {
    return this.#waiting.size > 0;
  }

  /** Code mode off: one effective tool, called directly through the same executor path. */
  async callDirect(
    name: string,
    input: JsonValue,
    signal: AbortSignal,
    progress?: (update: ToolProgress) => void,
  ): Promise<{ tool: HostTool; value: unknown }> {
    void this.run; // prepares the run (and the passthrough names) if tools changed since
    const tool = this.#direct.get(name);
    if (!tool) {
      throw new CodeModeError(
        "invalid_input",
        `Unknown tool "${name}". Call tools/list to see the tools of this server.`,
      );
    }
    const value = await this.#linked(signal, (linked) =>
      this.#host.runTool({
        tool,
        toolId: `${tool.source}:${tool.owner}:${tool.name}`,
        input,
        sessionId: this.sessionId,
        approvals: this.#approvals,
        signal: linked,
        ...(progress ? { progress } : {}),
        via: "direct",
        run: ownerContext(this.owner),
      }),
    );
    return { tool, value };
  }

  /** Nested calls of this session's exec and wait calls, under their parents. */
  trajectory(): TrajectoryExport {
    // Only this owner's log is read; another owner's entries are never copied.
    const full = this.#host.exportTrajectory(ownerContext(this.owner).sessionId);
    const prefix = `${this.sessionId}/`;
    return {
      ...full,
      entries: full.entries.filter((entry) =>
        (entry.parentToolCallId ?? entry.toolCallId).startsWith(prefix),
      ),
    };
  }

  /**
   * The client ended the session (or it was evicted): the calls it still has open are cancelled. Its
   * waiting runs stay for any other session of the same owner until their TTL ends.
   */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#abort.abort(new CodeModeError("aborted", "The MCP session ended."));
    this.#host.sessionEnded(this.sessionId);
  }
}
