// The contract's main entry does not load zod: its parsers check the common case by hand and load zod
// only to explain a refusal. The zod schemas themselves are in `@codecell/contract/schemas`.
export {
  CODE_MODE_CONTROL_TOOL_NAMES,
  type HostTool,
  isCodeModeControlTool,
  markCodeModeControlTool,
  TOOL_SOURCES,
  type ToolCatalogEntry,
  type ToolCatalogEntryWithSchema,
  type ToolSource,
} from "./catalog.js";
export { CodeModeError, type CodeModeErrorData } from "./code-mode-error.js";
export {
  type ClampedField,
  CODE_MODE_LANGUAGES,
  CODE_MODE_LIMITS,
  type CodeModeConfigInput,
  type CodeModeLanguage,
  type CodeModeLimitField,
  type ResolvedCodeModeConfig,
  resolveCodeModeConfig,
  TYPECHECK_MODES,
  type TypecheckMode,
} from "./config.js";
export { CODE_MODE_ERROR_CODES, type CodeModeErrorCode, isCodeModeErrorCode } from "./error-codes.js";
export {
  CONSOLE_LEVELS,
  type ConsoleLevel,
  GUEST_GLOBAL_NAMES,
  IMAGE_MIME_TYPES,
  type ImageMimeType,
  INTERNAL_NAME_PREFIX,
  JAVASCRIPT_RESERVED_WORDS,
  OBJECT_BEHAVIOUR_NAMES,
} from "./guest-names.js";
export {
  type CodeModeExecInput,
  type CodeModeWaitInput,
  type ExecRequest,
  execInputJsonSchema,
  parseExecInput,
  parseWaitInput,
  waitInputJsonSchema,
} from "./inputs.js";
export type { JsonObject, JsonValue } from "./json.js";
export type {
  BeforeToolCallDecision,
  BeforeToolCallEvent,
  CodecellPlugin,
  PluginFactory,
  PluginHooks,
  PluginSetup,
  PluginTool,
  PluginToolContext,
} from "./plugins.js";
export {
  type CodeModeCompletedResult,
  type CodeModeDiagnostic,
  type CodeModeFailedResult,
  type CodeModeModelResult,
  type CodeModeOutput,
  type CodeModePendingToolCall,
  type CodeModeResult,
  type CodeModeTelemetry,
  type CodeModeWaitingResult,
  codeModeModelResult,
  codeModeResultOutputSchema,
  codeModeResultText,
  emptyTelemetry,
  LIMIT_KINDS,
  type LimitKind,
  SNAPSHOT_EVENTS,
  type SnapshotEvent,
  textOutput,
} from "./results.js";
export { closestMatches, editDistance } from "./suggestions.js";
export {
  TRAJECTORY_FORMAT,
  type TrajectoryEntry,
  type TrajectoryExport,
  type TruncatedInput,
} from "./trajectory.js";
