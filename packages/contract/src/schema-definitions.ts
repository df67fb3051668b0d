import type { z as Z } from "zod";
import { TOOL_SOURCES } from "./catalog.js";
import { CODE_MODE_LIMITS, type CodeModeLimitField, TYPECHECK_MODES } from "./config.js";
import { CODE_MODE_ERROR_CODES } from "./error-codes.js";
import { CONSOLE_LEVELS, IMAGE_MIME_TYPES } from "./guest-names.js";
import { CODE_MODE_LANGUAGES } from "./languages.js";
import { LIMIT_KINDS, SNAPSHOT_EVENTS } from "./results.js";

/**
 * The contract's zod schemas, built from whichever copy of zod the caller holds: `./schemas.ts` passes
 * the ES module (what hosts embed in their own zod schemas), the parsers' refusal path passes the one
 * `loadZod()` requires on demand. Keeping one definition means the hand-written fast paths and the
 * messages of a refusal can never describe different shapes; the tests compare them.
 */
export function defineContractSchemas(z: typeof Z) {
  const toolCatalogEntrySchema = z.object({
    id: z.string(),
    name: z.string(),
    label: z.string().optional(),
    description: z.string(),
    source: z.enum(TOOL_SOURCES),
    sourceName: z.string().optional(),
  });

  const integerField = z.number().int();
  const limitFields = Object.keys(CODE_MODE_LIMITS) as CodeModeLimitField[];
  const codeModeConfigObjectSchema = z.strictObject({
    enabled: z.boolean().optional(),
    runtime: z.literal("quickjs-wasi").optional(),
    mode: z.literal("only").optional(),
    languages: z.array(z.enum(CODE_MODE_LANGUAGES)).min(1).optional(),
    typecheck: z.enum(TYPECHECK_MODES).optional(),
    images: z.boolean().optional(),
    ...(Object.fromEntries(limitFields.map((field) => [field, integerField.optional()])) as {
      [K in CodeModeLimitField]: Z.ZodOptional<typeof integerField>;
    }),
  });
  const codeModeConfigSchema = z.union([z.boolean(), codeModeConfigObjectSchema]);

  const execInputSchema = z.strictObject({
    code: z.string().optional().describe("The JavaScript or TypeScript cell to run."),
    command: z
      .string()
      .optional()
      .describe("Alias of code for exec-compatible hooks; must equal code if both are set."),
    language: z.enum(CODE_MODE_LANGUAGES).optional().describe('The cell language; default "javascript".'),
  });
  const waitInputSchema = z.strictObject({
    runId: z.string().min(1).describe("The runId of a waiting result."),
  });

  const codeModeOutputSchema = z.discriminatedUnion("type", [
    z.object({
      type: z.literal("text"),
      text: z.string(),
      /** Set when the text came from `console.<level>(...)`; absent for `text()`. */
      level: z.enum(CONSOLE_LEVELS).optional(),
    }),
    z.object({ type: z.literal("json"), value: z.unknown() }),
    z.object({ type: z.literal("image"), mimeType: z.enum(IMAGE_MIME_TYPES), data: z.string() }),
  ]);

  const count = () => z.number().int().nonnegative();
  const countsBySource = z.object(
    Object.fromEntries(TOOL_SOURCES.map((source) => [source, count()])) as {
      [K in (typeof TOOL_SOURCES)[number]]: Z.ZodNumber;
    },
  );
  const codeModeTelemetrySchema = z.object({
    visibleToolNames: z.array(z.string()),
    catalog: z.object({ size: count(), bySource: countsBySource }),
    execCount: count(),
    waitCount: count(),
    nested: z.object({
      searches: count(),
      describes: count(),
      calls: count(),
      failedCalls: count(),
      toolIds: z.array(z.string()),
    }),
    limitFailures: z.object(
      Object.fromEntries(LIMIT_KINDS.map((kind) => [kind, count()])) as {
        [K in (typeof LIMIT_KINDS)[number]]: Z.ZodNumber;
      },
    ),
    snapshotEvents: z.array(
      z.object({ event: z.enum(SNAPSHOT_EVENTS), runId: z.string(), bytes: z.number().optional() }),
    ),
    durationMs: z.number().nonnegative(),
    detectedLanguage: z.literal("typescript").optional(),
  });

  const codeModePendingToolCallSchema = z.object({
    callId: z.string(),
    toolId: z.string(),
    startedAt: z.string(),
    queued: z.literal(true).optional(),
  });

  const outputList = z.array(codeModeOutputSchema).optional();
  const codeModeDiagnosticSchema = z.object({
    file: z.literal("cell.ts"),
    line: z.number().int().positive(),
    column: z.number().int().positive(),
    code: z.string(),
    message: z.string(),
    accepts: z.array(z.string()).optional(),
  });
  const diagnosticList = z.array(codeModeDiagnosticSchema).optional();
  const codeModeCompletedResultSchema = z.object({
    status: z.literal("completed"),
    value: z.unknown(),
    output: outputList,
    diagnostics: diagnosticList,
    typecheckNote: z.string().optional(),
    telemetry: codeModeTelemetrySchema,
  });
  const codeModeWaitingResultSchema = z.object({
    status: z.literal("waiting"),
    runId: z.string(),
    reason: z.enum(["pending_tools", "yield"]),
    yieldReason: z.string().optional(),
    pendingToolCalls: z.array(codeModePendingToolCallSchema).optional(),
    output: outputList,
    diagnostics: diagnosticList,
    typecheckNote: z.string().optional(),
    telemetry: codeModeTelemetrySchema,
  });
  const codeModeFailedResultSchema = z.object({
    status: z.literal("failed"),
    error: z.string(),
    code: z.enum(CODE_MODE_ERROR_CODES).optional(),
    output: outputList,
    diagnostics: diagnosticList,
    typecheckNote: z.string().optional(),
    telemetry: codeModeTelemetrySchema,
  });
  const codeModeResultSchema = z.discriminatedUnion("status", [
    codeModeCompletedResultSchema,
    codeModeWaitingResultSchema,
    codeModeFailedResultSchema,
  ]);

  return {
    toolCatalogEntrySchema,
    codeModeConfigObjectSchema,
    codeModeConfigSchema,
    execInputSchema,
    waitInputSchema,
    codeModeOutputSchema,
    codeModeDiagnosticSchema,
    codeModeTelemetrySchema,
    codeModePendingToolCallSchema,
    codeModeCompletedResultSchema,
    codeModeWaitingResultSchema,
    codeModeFailedResultSchema,
    codeModeResultSchema,
  };
}

export type ContractSchemas = ReturnType<typeof defineContractSchemas>;
