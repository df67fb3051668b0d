// `@codecell/contract/schemas`: the contract as zod schemas, for hosts that validate results or embed
// the `tools.codeMode` schema in a larger config schema. The main entry stays free of zod (its parsers
// check the common case by hand and load zod only to explain a refusal); importing this entry loads it.
import { z } from "zod";
import type { ToolCatalogEntry } from "./catalog.js";
import type { CodeModeExecInput, CodeModeWaitInput } from "./inputs.js";
import type {
  CodeModeDiagnostic,
  CodeModeOutput,
  CodeModePendingToolCall,
  CodeModeResult,
  CodeModeTelemetry,
} from "./results.js";
import { defineContractSchemas } from "./schema-definitions.js";

const schemas = defineContractSchemas(z);

export const toolCatalogEntrySchema = schemas.toolCatalogEntrySchema;
export const codeModeConfigObjectSchema = schemas.codeModeConfigObjectSchema;
/** The accepted shape of `tools.codeMode` (boolean shorthand or object), for embedding in larger configs. */
export const codeModeConfigSchema = schemas.codeModeConfigSchema;
export const execInputSchema = schemas.execInputSchema;
export const waitInputSchema = schemas.waitInputSchema;
export const codeModeOutputSchema = schemas.codeModeOutputSchema;
export const codeModeDiagnosticSchema = schemas.codeModeDiagnosticSchema;
export const codeModeTelemetrySchema = schemas.codeModeTelemetrySchema;
export const codeModePendingToolCallSchema = schemas.codeModePendingToolCallSchema;
export const codeModeCompletedResultSchema = schemas.codeModeCompletedResultSchema;
export const codeModeWaitingResultSchema = schemas.codeModeWaitingResultSchema;
export const codeModeFailedResultSchema = schemas.codeModeFailedResultSchema;
export const codeModeResultSchema = schemas.codeModeResultSchema;

/** JSON Schema of the result union (the exact, large one; tools declare `codeModeResultOutputSchema`). */
export const codeModeResultJsonSchema = z.toJSONSchema(codeModeResultSchema, {
  target: "draft-7",
  unrepresentable: "any",
});

// The main entry declares these shapes as plain types; compilation fails here if a schema and its type
// ever disagree.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameShapes: [
  Same<z.infer<typeof toolCatalogEntrySchema>, ToolCatalogEntry>,
  Same<z.infer<typeof execInputSchema>, CodeModeExecInput>,
  Same<z.infer<typeof waitInputSchema>, CodeModeWaitInput>,
  Same<z.infer<typeof codeModeOutputSchema>, CodeModeOutput>,
  Same<z.infer<typeof codeModeDiagnosticSchema>, CodeModeDiagnostic>,
  Same<z.infer<typeof codeModeTelemetrySchema>, CodeModeTelemetry>,
  Same<z.infer<typeof codeModePendingToolCallSchema>, CodeModePendingToolCall>,
  Same<z.infer<typeof codeModeResultSchema>, CodeModeResult>,
] = [true, true, true, true, true, true, true, true];
void sameShapes;
