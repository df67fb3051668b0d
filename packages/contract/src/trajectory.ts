import type { JsonValue } from "./json.js";

/**
 * The trajectory as it travels: what the engine exports, a gateway serves (the MCP resource
 * `codecell://session/trajectory`, `GET /v1/codecell/threads/<thread>/trajectory`) and a client such as
 * the playground reads.
 */

/**
 * One recorded tool call. `control` entries are the model's exec and wait calls; `nested` entries are
 * the tool calls guest code made under them, linked by `parentToolCallId`.
 */
export type TrajectoryEntry = {
  kind: "control" | "nested";
  /** The model's tool call id (control) or `<parent toolCallId>/<request id>` (nested). */
  toolCallId: string;
  parentToolCallId?: string;
  /** `exec` or `wait` for control entries; the catalog id for nested ones. */
  tool: string;
  codeModeRunId?: string;
  /** How guest code reached the tool (nested entries). */
  via?: string;
  /** Redacted input (nested entries) or the cell's language (control entries). */
  input?: JsonValue;
  status: "running" | "completed" | "waiting" | "failed";
  /** The guest's `yield_control(reason)` text, when a control call ended waiting on a yield. */
  yieldReason?: string;
  code?: string;
  error?: string;
  /** Lines the host's executor added, such as an approval decision. */
  notes?: string[];
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
};

export const TRAJECTORY_FORMAT = "codecell.trajectory/1";

/** What a host persists with its transcript; the engine's `importTrajectory` reads it back. */
export type TrajectoryExport = { format: typeof TRAJECTORY_FORMAT; entries: TrajectoryEntry[] };

/** What an input longer than the engine's `maxInputBytes` is replaced with: its size and the start of its JSON. */
export type TruncatedInput = { $truncated: { bytes: number; preview: string } };
