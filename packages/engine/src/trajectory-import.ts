import { createRequire } from "node:module";
import {
  CodeModeError,
  TRAJECTORY_FORMAT,
  type TrajectoryEntry,
  type TrajectoryExport,
} from "@codecell/contract";
import type * as Zod from "zod";

/** Reading an exported trajectory back, and the shape a support bundle shows it in. */

/**
 * The schema `importTrajectory` checks against, built on first use: zod (about half of the engine's
 * import CPU) is loaded only when a host reads a trajectory back, never on the way to a first exec.
 */
function trajectorySchema() {
  const { z } = createRequire(import.meta.url)("zod") as typeof Zod;
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
  return z.object({ format: z.literal(TRAJECTORY_FORMAT), entries: z.array(entrySchema) });
}

/** Reads back an exported trajectory (from a transcript store), refusing anything malformed. */
export function importTrajectory(data: unknown): TrajectoryExport {
  const parsed = trajectorySchema().safeParse(data);
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
