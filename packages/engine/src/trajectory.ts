import { CodeModeError, type JsonValue } from "@codecell/contract";
import { z } from "zod";

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

const entrySchema = z.object({
  kind: z.enum(["control", "nested"]),
  toolCallId: z.string().min(1),
  parentToolCallId: z.string().optional(),
  tool: z.string().min(1),
  codeModeRunId: z.string().optional(),
  via: z.string().optional(),
  input: z.json().optional(),
  status: z.enum(["running", "completed", "waiting", "failed"]),
  yieldReason: z.string().optional(),
  code: z.string().optional(),
  error: z.string().optional(),
  notes: z.array(z.string()).optional(),
  startedAt: z.string(),
  endedAt: z.string().optional(),
  durationMs: z.number().optional(),
});

export const TRAJECTORY_FORMAT = "codecell.trajectory/1";

/** What a host persists with its transcript; `importTrajectory` reads it back. */
export type TrajectoryExport = { format: typeof TRAJECTORY_FORMAT; entries: TrajectoryEntry[] };

/** Bounded, ordered record of control and nested calls; oldest entries go first when full. */
export class TrajectoryRecorder {
  readonly #entries: TrajectoryEntry[] = [];
  readonly #max: number;

  constructor(maxEntries: number) {
    this.#max = maxEntries;
  }

  start(entry: Omit<TrajectoryEntry, "status" | "startedAt">): TrajectoryEntry {
    const recorded: TrajectoryEntry = { ...entry, status: "running", startedAt: new Date().toISOString() };
    this.#entries.push(recorded);
    if (this.#entries.length > this.#max) this.#entries.splice(0, this.#entries.length - this.#max);
    return recorded;
  }

  end(
    entry: TrajectoryEntry,
    status: TrajectoryEntry["status"],
    failure?: { code?: string; error: string },
  ): void {
    const endedAt = new Date();
    entry.status = status;
    entry.endedAt = endedAt.toISOString();
    entry.durationMs = endedAt.getTime() - Date.parse(entry.startedAt);
    if (failure?.code) entry.code = failure.code;
    if (failure) entry.error = failure.error;
  }

  /** At most 20 notes of 500 characters per entry: hosts annotate decisions, not logs. */
  note(entry: TrajectoryEntry, text: string): void {
    entry.notes ??= [];
    if (entry.notes.length < 20) entry.notes.push(String(text).slice(0, 500));
  }

  export(filter?: { parentToolCallId?: string; codeModeRunId?: string }): TrajectoryExport {
    const entries = this.#entries.filter(
      (entry) =>
        (!filter?.parentToolCallId ||
          entry.parentToolCallId === filter.parentToolCallId ||
          entry.toolCallId === filter.parentToolCallId) &&
        (!filter?.codeModeRunId || entry.codeModeRunId === filter.codeModeRunId),
    );
    return { format: TRAJECTORY_FORMAT, entries: structuredClone(entries) };
  }
}

/** Reads back an exported trajectory (from a transcript store), refusing anything malformed. */
export function importTrajectory(data: unknown): TrajectoryExport {
  const parsed = z
    .object({ format: z.literal(TRAJECTORY_FORMAT), entries: z.array(entrySchema) })
    .safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CodeModeError(
      "invalid_input",
      `Not a codecell trajectory: ${issue.path.join(".") || "value"}: ${issue.message}.`,
    );
  }
  return parsed.data as TrajectoryExport;
}

/**
 * Projects a trajectory onto transcript-style tool calls: each control call with its nested calls as
 * children, the way a support bundle shows what happened.
 */
export function trajectoryTree(
  trajectory: TrajectoryExport,
): Array<TrajectoryEntry & { nested: TrajectoryEntry[] }> {
  const controls = trajectory.entries.filter((entry) => entry.kind === "control");
  return controls.map((control) => ({
    ...control,
    nested: trajectory.entries.filter(
      (entry) => entry.kind === "nested" && entry.parentToolCallId === control.toolCallId,
    ),
  }));
}
