/**
 * The closed set of failure codes a code-mode result can carry. Every failure that reaches a model or a
 * host is one of these; nothing else is ever put in `code`.
 */
export const CODE_MODE_ERROR_CODES = [
  "runtime_unavailable",
  "invalid_config",
  "invalid_input",
  "unsupported_language",
  "typescript_transform_failed",
  "module_access_denied",
  "timeout",
  "memory_limit_exceeded",
  "output_limit_exceeded",
  "snapshot_limit_exceeded",
  "snapshot_expired",
  "snapshot_restore_failed",
  "too_many_pending_tool_calls",
  "nested_tool_failed",
  "aborted",
  "internal_error",
] as const;

export type CodeModeErrorCode = (typeof CODE_MODE_ERROR_CODES)[number];

const knownCodes: ReadonlySet<string> = new Set(CODE_MODE_ERROR_CODES);

export function isCodeModeErrorCode(value: unknown): value is CodeModeErrorCode {
  return typeof value === "string" && knownCodes.has(value);
}
