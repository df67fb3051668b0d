import type { ToolSource } from "./catalog.js";
import type { CodeModeErrorCode } from "./error-codes.js";
import type { ConsoleLevel, ImageMimeType } from "./guest-names.js";

// The shapes below are plain types so that importing the contract does not load zod; their zod schemas
// (`codeModeResultSchema` and its parts) live in `@codecell/contract/schemas`, and a type test there
// keeps the two identical.

/** One output item, in the order the guest produced it with `text()`, `json()` or `console.*`. */
export type CodeModeOutput =
  | {
      type: "text";
      text: string;
      /** Set when the text came from `console.<level>(...)`; absent for `text()`. */
      level?: ConsoleLevel;
    }
  | { type: "json"; value: unknown }
  /** From `image(source)` (`tools.codeMode.images`): base64 `data` of one of IMAGE_MIME_TYPES. */
  | { type: "image"; mimeType: ImageMimeType; data: string };

/**
 * The output as a model reads it in text: an image item names its type and size instead of carrying
 * its base64 data, which each front delivers in its own image form beside the text.
 */
export function textOutput(
  output: readonly CodeModeOutput[],
): CodeModeOutput[] | Array<Record<string, unknown>> {
  if (!output.some((item) => item.type === "image")) return output as CodeModeOutput[];
  return output.map((item) =>
    item.type === "image" ? { type: "image", mimeType: item.mimeType, bytes: item.data.length } : item,
  );
}

/**
 * One finding of the opt-in type check (`tools.codeMode.typecheck`), placed on the cell as the model
 * wrote it: `line` and `column` are 1-based in the cell's own text.
 */
export type CodeModeDiagnostic = {
  /** Always "cell.ts": the cell, named as a file so a position reads like a compiler's. */
  file: "cell.ts";
  line: number;
  column: number;
  /** The compiler's code for the finding, such as "TS2353". */
  code: string;
  message: string;
  /** For a property the target does not have: the properties it accepts (at most 20). */
  accepts?: string[];
};

export const SNAPSHOT_EVENTS = ["stored", "resumed", "expired", "aborted", "deleted", "refused"] as const;
export type SnapshotEvent = (typeof SNAPSHOT_EVENTS)[number];

export const LIMIT_KINDS = ["timeout", "memory", "output", "snapshot", "pendingToolCalls"] as const;
export type LimitKind = (typeof LIMIT_KINDS)[number];

export type CodeModeTelemetry = {
  /** Tool names the model was sent (exactly exec and wait when code mode is active). */
  visibleToolNames: string[];
  /** The hidden catalog: total size and breakdown by source. */
  catalog: { size: number; bySource: { [K in ToolSource]: number } };
  execCount: number;
  waitCount: number;
  nested: {
    searches: number;
    describes: number;
    calls: number;
    failedCalls: number;
    /** Catalog ids of the nested tools called, in call order (repeats kept). */
    toolIds: string[];
  };
  limitFailures: { [K in LimitKind]: number };
  snapshotEvents: Array<{ event: SnapshotEvent; runId: string; bytes?: number }>;
  durationMs: number;
  /**
   * "typescript" when the cell came as JavaScript (no `language`, or "javascript") but parses only as
   * TypeScript, so it ran as TypeScript.
   */
  detectedLanguage?: "typescript";
};

export type CodeModePendingToolCall = {
  /** The bridge request id inside the run. */
  callId: string;
  /** The catalog id of the nested tool. */
  toolId: string;
  /** ISO time the call started; for a queued call, when the cell made it. */
  startedAt: string;
  /** Set while the call waits for one of the run's `maxPendingToolCalls` slots (it starts in order). */
  queued?: true;
};

export type CodeModeCompletedResult = {
  status: "completed";
  value: unknown;
  output?: CodeModeOutput[];
  /** Type-check findings of the cell (typecheck "warn" or "strict"); absent when there are none. */
  diagnostics?: CodeModeDiagnostic[];
  /** Typecheck "warn": why the cell's check did not finish, when it did not (the cell ran unchecked). */
  typecheckNote?: string;
  telemetry: CodeModeTelemetry;
};
export type CodeModeWaitingResult = {
  status: "waiting";
  runId: string;
  reason: "pending_tools" | "yield";
  /** What the guest passed to `yield_control(reason)` (at most 500 characters). */
  yieldReason?: string;
  pendingToolCalls?: CodeModePendingToolCall[];
  output?: CodeModeOutput[];
  /** Type-check findings of the cell (typecheck "warn" or "strict"); absent when there are none. */
  diagnostics?: CodeModeDiagnostic[];
  /** Typecheck "warn": why the cell's check did not finish, when it did not (the cell ran unchecked). */
  typecheckNote?: string;
  telemetry: CodeModeTelemetry;
};
export type CodeModeFailedResult = {
  status: "failed";
  error: string;
  code?: CodeModeErrorCode;
  output?: CodeModeOutput[];
  /** Type-check findings of the cell (typecheck "warn" or "strict"); absent when there are none. */
  diagnostics?: CodeModeDiagnostic[];
  /** Typecheck "warn": why the cell's check did not finish, when it did not (the cell ran unchecked). */
  typecheckNote?: string;
  telemetry: CodeModeTelemetry;
};
export type CodeModeResult = CodeModeCompletedResult | CodeModeWaitingResult | CodeModeFailedResult;

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
  | {
      status: "completed";
      value: unknown;
      output?: CodeModeOutput[];
      diagnostics?: CodeModeDiagnostic[];
      typecheckNote?: string;
    }
  | {
      status: "waiting";
      runId: string;
      reason: "pending_tools" | "yield";
      yieldReason?: string;
      pendingToolCalls?: Array<{ callId: string; toolId: string; queued?: true }>;
      output?: CodeModeOutput[];
      diagnostics?: CodeModeDiagnostic[];
      typecheckNote?: string;
    }
  | {
      status: "failed";
      error: string;
      code?: CodeModeFailedResult["code"];
      output?: CodeModeOutput[];
      diagnostics?: CodeModeDiagnostic[];
      typecheckNote?: string;
    };

/** The model's view of a result: status, value or error and code, output, runId, reason, pending calls. */
export function codeModeModelResult(result: CodeModeResult): CodeModeModelResult {
  const output = {
    ...(result.output?.length ? { output: textOutput(result.output) as CodeModeOutput[] } : {}),
    ...(result.diagnostics?.length ? { diagnostics: result.diagnostics } : {}),
    ...(result.typecheckNote ? { typecheckNote: result.typecheckNote } : {}),
  };
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
    diagnostics: { type: "array", items: { type: "object" } },
    typecheckNote: { type: "string" },
    telemetry: { type: "object" },
  },
  required: ["status"],
} as const;
