// The zod-free part of the contract, for code on hot start-up paths (sandbox workers, the bridge,
// transpile): importing it loads no other module, while the full entry loads zod, a large import.
// Everything here is also exported from the main entry.
export { CodeModeError, type CodeModeErrorData } from "./code-mode-error.js";
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
export type { JsonObject, JsonValue } from "./json.js";
export { CODE_MODE_LANGUAGES, type CodeModeLanguage } from "./languages.js";
export { CODE_MODE_LIMITS } from "./limits.js";
export { closestMatches, editDistance } from "./suggestions.js";
