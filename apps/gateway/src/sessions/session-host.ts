import type { BeforeToolCallEvent, HostTool, JsonValue } from "@codecell/contract";
import type {
  ExecHookMetadata,
  PreparedRun,
  RunContext,
  ToolProgress,
  TrajectoryExport,
} from "@codecell/engine";
import type { ApprovalClient } from "../mcp/approvals.js";

/** Where one tool call runs, whichever way it was reached (nested in a cell, or directly). */
export type ToolCallRequest = {
  tool: HostTool;
  toolId: string;
  input: JsonValue;
  sessionId: string;
  approvals: ApprovalClient;
  signal: AbortSignal;
  /**
   * Whether the call was cancelled, read without making `signal` (a nested call's signal is made the
   * first time it is read); absent: `signal.aborted` is checked.
   */
  cancelled?: () => boolean;
  /** Records a decision (such as an approval) on the nested call's trajectory entry. */
  note?: (text: string) => void;
  /** Hears the tool's progress: a downstream server's notifications, a plugin's updates. */
  progress?: (update: ToolProgress) => void;
  /** The code-mode run a nested call belongs to (its write budget); absent for direct calls. */
  runKey?: string;
  /**
   * Hands a nested call out of the run (it suspends, and the call's outcome is settled later through the
   * engine): how an approval is left to a client's retry. Absent for direct calls.
   */
  handOut?: () => { runId: string; callId: string };
  /** How the call was reached, and the run it belongs to: what `before_tool_call` hooks see. */
  via?: BeforeToolCallEvent["via"];
  run?: BeforeToolCallEvent["run"];
};

/**
 * What a session needs from the gateway, and nothing more. The gateway implements it; the session
 * depends only on this, so the import arrow runs one way (gateway → session → session-host).
 */
export interface SessionHost {
  /** Bumped when a downstream server changes its tools, so sessions re-prepare their run. */
  readonly toolsVersion: number;
  /** Prepares a run over the current effective tools; `tools` are those tools (for passthrough names). */
  prepareRun(
    context: RunContext,
    sessionId: string,
    approvals: ApprovalClient,
  ): { run: PreparedRun; tools: readonly HostTool[] };
  /** Runs one tool from any source, after policy and approval. */
  runTool(request: ToolCallRequest): Promise<unknown>;
  /** The plugins' hooks on the model's own exec call: the input to run, or a throw that blocks it. */
  beforeExec(
    input: unknown,
    metadata: ExecHookMetadata,
    sessionId: string,
    run: BeforeToolCallEvent["run"],
  ): Promise<unknown>;
  /** One run owner's trajectory (its `RunContext.sessionId`): exec and wait calls with their nested calls. */
  exportTrajectory(ownerSessionId: string): TrajectoryExport;
  /** The session has ended: the host forgets it. */
  sessionEnded(sessionId: string): void;
}
