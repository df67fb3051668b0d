import { CodeModeError, type CodeModeResult, type HostTool, type JsonValue } from "@codecell/contract";
import type { ModelTool, PreparedRun, TrajectoryExport } from "@codecell/engine";
import type { ApprovalClient } from "./approvals.js";
import type { Gateway } from "./gateway.js";

/** Who every gateway run belongs to, as the engine and the snapshot store see it. */
export const GATEWAY_AGENT_ID = "codecell-gateway";

/**
 * One MCP session = one code-mode session. From the gateway's side an MCP client session is one long
 * agent run, so the run id is the session id: a `runId` handed out in one session can only be waited on
 * from the same session (the store checks agent, session and run on every claim).
 */
export class GatewaySession {
  readonly sessionId: string;
  readonly #gateway: Gateway;
  readonly #approvals: ApprovalClient;
  readonly #abort = new AbortController();
  readonly #onEnd: () => void;
  #run: PreparedRun | null = null;
  #preparedAt = -1;
  #calls = 0;
  /** Model-facing names of passthrough tools, when code mode is off. */
  #direct = new Map<string, HostTool>();

  constructor(gateway: Gateway, sessionId: string, approvals: ApprovalClient, onEnd: () => void) {
    this.#gateway = gateway;
    this.sessionId = sessionId;
    this.#approvals = approvals;
    this.#onEnd = onEnd;
  }

  /** The prepared run, prepared again when a downstream server changed its tools. */
  get run(): PreparedRun {
    if (!this.#run || this.#preparedAt !== this.#gateway.toolsVersion) {
      const tools = this.#gateway.effectiveTools();
      const { allow, deny } = this.#gateway.policy();
      this.#preparedAt = this.#gateway.toolsVersion;
      this.#run = this.#gateway.engine.prepareRun({
        tools,
        ...(allow ? { allow } : {}),
        deny,
        mcpServers: this.#gateway.connector.describeServers(),
        context: {
          agentId: GATEWAY_AGENT_ID,
          sessionKey: this.sessionId,
          sessionId: this.sessionId,
          runId: this.sessionId,
          signal: this.#abort.signal,
        },
        executor: this.#gateway.executorFor(this.sessionId, this.#approvals),
      });
      this.#direct = new Map();
      if (!this.#run.active) {
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

  exec(input: unknown): Promise<CodeModeResult> {
    return this.run.exec(input, { toolCallId: this.#nextToolCallId() });
  }

  wait(input: unknown): Promise<CodeModeResult> {
    return this.run.wait(input, { toolCallId: this.#nextToolCallId() });
  }

  /** Code mode off: one effective tool, called directly through the same executor path. */
  async callDirect(
    name: string,
    input: JsonValue,
    signal: AbortSignal,
  ): Promise<{ tool: HostTool; value: unknown }> {
    void this.run; // prepares the run (and the passthrough names) if tools changed since
    const tool = this.#direct.get(name);
    if (!tool) {
      throw new CodeModeError(
        "invalid_input",
        `Unknown tool "${name}". Call tools/list to see the tools of this server.`,
      );
    }
    const value = await this.#gateway.runTool({
      tool,
      toolId: this.#gateway.toolIdOf(tool),
      input,
      sessionId: this.sessionId,
      approvals: this.#approvals,
      signal: AbortSignal.any([signal, this.#abort.signal]),
    });
    return { tool, value };
  }

  /** Nested calls of this session's exec and wait calls, under their parents. */
  trajectory(): TrajectoryExport {
    const full = this.#gateway.engine.exportTrajectory();
    const prefix = `${this.sessionId}/`;
    return {
      ...full,
      entries: full.entries.filter((entry) =>
        (entry.parentToolCallId ?? entry.toolCallId).startsWith(prefix),
      ),
    };
  }

  /**
   * Leaves the session without deleting its waiting runs, so a restart on a durable store may resume
   * them. The run context's signal is not aborted here: that would abort the waiting runs too. Live
   * nested calls are cancelled by the engine's close.
   */
  detach(): void {
    this.#onEnd();
  }

  /** The client ended the session: its waiting runs are deleted and its nested calls cancelled. */
  async end(): Promise<void> {
    this.#abort.abort(new CodeModeError("aborted", "The MCP session ended."));
    this.#onEnd();
    await this.#gateway.engine.endSession(this.sessionId).catch(() => {});
  }
}
