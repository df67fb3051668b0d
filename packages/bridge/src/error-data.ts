import { CodeModeError, type CodeModeErrorData, isCodeModeErrorCode } from "@codecell/contract/errors";
import { toJsonValue } from "./json-adapter.js";

/** Longest name and message kept when an error crosses into the guest. */
export const MAX_ERROR_NAME_LENGTH = 128;
export const MAX_ERROR_MESSAGE_LENGTH = 8192;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function safeString(value: unknown, fallback: string): string {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return fallback;
  try {
    return String(value);
  } catch {
    return fallback;
  }
}

/**
 * Turn anything a host threw into plain data: name, message and, when it carries one, a code from the
 * closed set. No stack, prototype or function survives; `details` only when they are JSON.
 */
export function toErrorData(error: unknown): CodeModeErrorData {
  if (CodeModeError.is(error)) {
    const data: CodeModeErrorData = {
      name: clip(safeString(error.name, "CodeModeError"), MAX_ERROR_NAME_LENGTH),
      message: clip(safeString(error.message, ""), MAX_ERROR_MESSAGE_LENGTH),
      code: error.code,
    };
    if (error.details !== undefined) {
      try {
        const details = toJsonValue(error.details);
        if (details !== null && typeof details === "object" && !Array.isArray(details))
          data.details = details;
      } catch {
        // Details that cannot cross are dropped; the message still says what went wrong.
      }
    }
    return data;
  }
  if (error instanceof Error) {
    const data: CodeModeErrorData = {
      name: clip(safeString(error.name, "Error"), MAX_ERROR_NAME_LENGTH),
      message: clip(safeString(error.message, ""), MAX_ERROR_MESSAGE_LENGTH),
    };
    const code = (error as { code?: unknown }).code;
    if (isCodeModeErrorCode(code)) data.code = code;
    return data;
  }
  if (typeof error === "object" && error !== null) {
    const record = error as { name?: unknown; message?: unknown; code?: unknown };
    const data: CodeModeErrorData = {
      name: clip(safeString(record.name, "Error"), MAX_ERROR_NAME_LENGTH),
      message: clip(safeString(record.message, "unknown error"), MAX_ERROR_MESSAGE_LENGTH),
    };
    if (isCodeModeErrorCode(record.code)) data.code = record.code;
    return data;
  }
  return { name: "Error", message: clip(safeString(error, "unknown error"), MAX_ERROR_MESSAGE_LENGTH) };
}

/** Check that a value is well-formed error data (as the worker receives it). */
export function isErrorData(value: unknown): value is CodeModeErrorData {
  if (typeof value !== "object" || value === null) return false;
  const record = value as Record<string, unknown>;
  if (typeof record.name !== "string" || typeof record.message !== "string") return false;
  if (record.code !== undefined && !isCodeModeErrorCode(record.code)) return false;
  if (record.details !== undefined && (typeof record.details !== "object" || record.details === null))
    return false;
  return true;
}
