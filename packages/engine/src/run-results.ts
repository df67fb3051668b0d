// Shaping a failed exec or wait result: the error code, its limit count, the output so far and the duration.
import {
  CodeModeError,
  type CodeModeErrorCode,
  type CodeModeOutput,
  type CodeModeResult,
  type CodeModeTelemetry,
} from "@codecell/contract";
import { countLimitFailure } from "./run-telemetry.js";

export function failedResult(
  code: CodeModeErrorCode | undefined,
  error: string,
  telemetry: CodeModeTelemetry,
  output: CodeModeOutput[] = [],
  startedAt = Date.now(),
): CodeModeResult {
  countLimitFailure(telemetry, code);
  telemetry.durationMs = Date.now() - startedAt;
  return {
    status: "failed",
    error,
    ...(code ? { code } : {}),
    ...(output.length ? { output } : {}),
    telemetry,
  };
}

/** A thrown error as a failed result: a CodeModeError keeps its code, anything else is internal_error. */
export function failureResult(
  error: unknown,
  telemetry: CodeModeTelemetry,
  startedAt: number,
): CodeModeResult {
  if (CodeModeError.is(error)) return failedResult(error.code, error.message, telemetry, [], startedAt);
  return failedResult("internal_error", `Internal error: ${String(error)}`, telemetry, [], startedAt);
}
