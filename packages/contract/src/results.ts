import { z } from "zod";
import { TOOL_SOURCES } from "./catalog.js";
import { CODE_MODE_ERROR_CODES } from "./error-codes.js";
import { CONSOLE_LEVELS } from "./guest-names.js";

export const codeModeOutputSchema = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("text"),
    text: z.string(),
    /** Set when the text came from `console.<level>(...)`; absent for `text()`. */
    level: z.enum(CONSOLE_LEVELS).optional(),
  }),
  z.object({ type: z.literal("json"), value: z.unknown() }),
]);
/** One output item, in the order the guest produced it with `text()`, `json()` or `console.*`. */
export type CodeModeOutput = z.infer<typeof codeModeOutputSchema>;

export const SNAPSHOT_EVENTS = ["stored", "resumed", "expired", "aborted", "deleted", "refused"] as const;
export type SnapshotEvent = (typeof SNAPSHOT_EVENTS)[number];

export const LIMIT_KINDS = ["timeout", "memory", "output", "snapshot", "pendingToolCalls"] as const;
export type LimitKind = (typeof LIMIT_KINDS)[number];

const countsBySource = z.object(
  Object.fromEntries(TOOL_SOURCES.map((source) => [source, z.number().int().nonnegative()])) as {
    [K in (typeof TOOL_SOURCES)[number]]: z.ZodNumber;
  },
);

export const codeModeTelemetrySchema = z.object({
  /** Tool names the model was sent (exactly exec and wait when code mode is active). */
  visibleToolNames: z.array(z.string()),
  /** The hidden catalog: total size and breakdown by source. */
  catalog: z.object({ size: z.number().int().nonnegative(), bySource: countsBySource }),
  execCount: z.number().int().nonnegative(),
  waitCount: z.number().int().nonnegative(),
  nested: z.object({
    searches: z.number().int().nonnegative(),
    describes: z.number().int().nonnegative(),
    calls: z.number().int().nonnegative(),
    failedCalls: z.number().int().nonnegative(),
    /** Catalog ids of the nested tools called, in call order (repeats kept). */
    toolIds: z.array(z.string()),
  }),
  limitFailures: z.object(
    Object.fromEntries(LIMIT_KINDS.map((kind) => [kind, z.number().int().nonnegative()])) as {
      [K in LimitKind]: z.ZodNumber;
    },
  ),
  snapshotEvents: z.array(
    z.object({ event: z.enum(SNAPSHOT_EVENTS), runId: z.string(), bytes: z.number().optional() }),
  ),
  durationMs: z.number().nonnegative(),
  /**
   * "typescript" when the cell came as JavaScript (no `language`, or "javascript") but parses only as
   * TypeScript, so it ran as TypeScript.
   */
  detectedLanguage: z.literal("typescript").optional(),
});
export type CodeModeTelemetry = z.infer<typeof codeModeTelemetrySchema>;

export const codeModePendingToolCallSchema = z.object({
  /** The bridge request id inside the run. */
  callId: z.string(),
  /** The catalog id of the nested tool. */
  toolId: z.string(),
  /** ISO time the call started; for a queued call, when the cell made it. */
  startedAt: z.string(),
  /** Set while the call waits for one of the run's `maxPendingToolCalls` slots (it starts in order). */
  queued: z.literal(true).optional(),
});
export type CodeModePendingToolCall = z.infer<typeof codeModePendingToolCallSchema>;

const outputList = z.array(codeModeOutputSchema).optional();

export const codeModeCompletedResultSchema = z.object({
  status: z.literal("completed"),
  value: z.unknown(),
  output: outputList,
  telemetry: codeModeTelemetrySchema,
});
export const codeModeWaitingResultSchema = z.object({
  status: z.literal("waiting"),
  runId: z.string(),
  reason: z.enum(["pending_tools", "yield"]),
  /** What the guest passed to `yield_control(reason)` (at most 500 characters). */
  yieldReason: z.string().optional(),
  pendingToolCalls: z.array(codeModePendingToolCallSchema).optional(),
  output: outputList,
  telemetry: codeModeTelemetrySchema,
});
export const codeModeFailedResultSchema = z.object({
  status: z.literal("failed"),
  error: z.string(),
  code: z.enum(CODE_MODE_ERROR_CODES).optional(),
  output: outputList,
  telemetry: codeModeTelemetrySchema,
});
export const codeModeResultSchema = z.discriminatedUnion("status", [
  codeModeCompletedResultSchema,
  codeModeWaitingResultSchema,
  codeModeFailedResultSchema,
]);

export type CodeModeCompletedResult = z.infer<typeof codeModeCompletedResultSchema>;
export type CodeModeWaitingResult = z.infer<typeof codeModeWaitingResultSchema>;
export type CodeModeFailedResult = z.infer<typeof codeModeFailedResultSchema>;
export type CodeModeResult = z.infer<typeof codeModeResultSchema>;

/** JSON Schema of the result union, for MCP `outputSchema`. */
export const codeModeResultJsonSchema = z.toJSONSchema(codeModeResultSchema, {
  target: "draft-7",
  unrepresentable: "any",
});

/** Telemetry with every counter at zero, for a result produced before anything ran. */
export function emptyTelemetry(): CodeModeTelemetry {
  return {
    visibleToolNames: [],
    catalog: { size: 0, bySource: { core: 0, plugin: 0, mcp: 0, client: 0 } },
    execCount: 0,
    waitCount: 0,
    nested: { searches: 0, describes: 0, calls: 0, failedCalls: 0, toolIds: [] },
    limitFailures: { timeout: 0, memory: 0, output: 0, snapshot: 0, pendingToolCalls: 0 },
    snapshotEvents: [],
    durationMs: 0,
  };
}

/**
 * A result as the model reads it: what it needs to go on, nothing else. Telemetry and the start times
 * of pending calls are for hosts and stay in the full result (MCP `structuredContent`).
 */
export type CodeModeModelResult =
  | { status: "completed"; value: unknown; output?: CodeModeOutput[] }
  | {
      status: "waiting";
      runId: string;
      reason: "pending_tools" | "yield";
      yieldReason?: string;
      pendingToolCalls?: Array<{ callId: string; toolId: string; queued?: true }>;
      output?: CodeModeOutput[];
    }
  | { status: "failed"; error: string; code?: CodeModeFailedResult["code"]; output?: CodeModeOutput[] };

/** The model's view of a result: status, value or error and code, output, runId, reason, pending calls. */
export function codeModeModelResult(result: CodeModeResult): CodeModeModelResult {
  const output = result.output?.length ? { output: result.output } : {};
  if (result.status === "completed") return { status: "completed", value: result.value, ...output };
  if (result.status === "failed") {
    return {
      status: "failed",
      error: result.error,
      ...(result.code ? { code: result.code } : {}),
      ...output,
    };
  }
  return {
    status: "waiting",
    runId: result.runId,
    reason: result.reason,
    ...(result.yieldReason !== undefined ? { yieldReason: result.yieldReason } : {}),
    ...(result.pendingToolCalls?.length
      ? {
          pendingToolCalls: result.pendingToolCalls.map(({ callId, toolId, queued }) => ({
            callId,
            toolId,
            ...(queued ? { queued } : {}),
          })),
        }
      : {}),
    ...output,
  };
}

/** The text a model is given for a result: the compact JSON of `codeModeModelResult`. */
export function codeModeResultText(result: CodeModeResult): string {
  return JSON.stringify(codeModeModelResult(result));
}

/**
 * The one small JSON Schema exec and wait declare as MCP `outputSchema`, shared by both. It names the
 * fields a client reads and accepts the full result (telemetry included) that travels as
 * `structuredContent`; `codeModeResultJsonSchema` is the exact, much larger schema for hosts.
 */
export const codeModeResultOutputSchema = {
  type: "object",
  properties: {
    status: { enum: ["completed", "waiting", "failed"] },
    value: {},
    error: { type: "string" },
    code: { type: "string" },
    output: { type: "array", items: { type: "object" } },
    runId: { type: "string" },
    reason: { enum: ["pending_tools", "yield"] },
    yieldReason: { type: "string" },
    pendingToolCalls: { type: "array", items: { type: "object" } },
    telemetry: { type: "object" },
  },
  required: ["status"],
} as const;
