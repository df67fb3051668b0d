import { CodeModeError, closestMatches, type JsonValue } from "@codecell/contract";
import {
  CALLER_SCOPE_FIELDS,
  type CallerScope,
  type CallOutcome,
  type PendingCallState,
  RUN_SCOPE_FIELDS,
  type RunScope,
  type RunSelector,
} from "./types.js";

const SELECTOR_FIELDS = ["runId", ...RUN_SCOPE_FIELDS] as const;

function fail(message: string): never {
  throw new CodeModeError("invalid_input", message);
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Keeps error messages bounded when a caller passes something huge. */
export function preview(text: string, max = 64): string {
  return text.length <= max ? text : `${text.slice(0, max)}...`;
}

export function checkScope(scope: unknown, where: string): RunScope {
  if (!isRecord(scope)) fail(`${where}: scope must be an object with ${RUN_SCOPE_FIELDS.join(", ")}`);
  for (const field of RUN_SCOPE_FIELDS) {
    if (!isNonEmptyString(scope[field])) {
      fail(`${where}: scope.${field} must be a non-empty string (got ${describe(scope[field])})`);
    }
  }
  const { agentId, sessionKey, sessionId, parentRunId, toolCallId } = scope as RunScope;
  return { agentId, sessionKey, sessionId, parentRunId, toolCallId };
}

/** The caller's scope; extra fields (such as the wait call's own toolCallId) are ignored. */
export function checkCallerScope(scope: unknown, where: string): CallerScope {
  if (!isRecord(scope)) fail(`${where}: scope must be an object with ${CALLER_SCOPE_FIELDS.join(", ")}`);
  for (const field of CALLER_SCOPE_FIELDS) {
    if (!isNonEmptyString(scope[field])) {
      fail(`${where}: scope.${field} must be a non-empty string (got ${describe(scope[field])})`);
    }
  }
  const { agentId, sessionKey, sessionId, parentRunId } = scope as CallerScope;
  return { agentId, sessionKey, sessionId, parentRunId };
}

export function checkSelector(selector: unknown, where: string): RunSelector {
  if (!isRecord(selector)) fail(`${where}: the selector must be an object such as { sessionId }`);
  const keys = Object.keys(selector);
  for (const key of keys) {
    if (!(SELECTOR_FIELDS as readonly string[]).includes(key)) {
      const guesses = closestMatches(key, [...SELECTOR_FIELDS]);
      const hint = guesses.length > 0 ? ` Did you mean "${guesses[0]}"?` : "";
      fail(
        `${where}: unknown selector field "${preview(key)}".${hint} Allowed: ${SELECTOR_FIELDS.join(", ")}`,
      );
    }
    if (!isNonEmptyString(selector[key])) fail(`${where}: selector.${key} must be a non-empty string`);
  }
  if (keys.length === 0) {
    fail(
      `${where}: the selector is empty; give at least one of ${SELECTOR_FIELDS.join(", ")} (an empty one would match every run)`,
    );
  }
  return selector as RunSelector;
}

export function checkSnapshot(snapshot: unknown, where: string): Uint8Array {
  if (!(snapshot instanceof Uint8Array))
    fail(`${where}: snapshot must be a Uint8Array (got ${describe(snapshot)})`);
  if (snapshot.byteLength === 0) fail(`${where}: snapshot is empty; pass the compressed VM snapshot bytes`);
  return snapshot;
}

export function checkOutcome(outcome: unknown, where: string): CallOutcome {
  if (!isRecord(outcome) || typeof outcome.ok !== "boolean") {
    fail(`${where}: outcome must be { ok: true, value } or { ok: false, error: { name, message, code? } }`);
  }
  if (outcome.ok) {
    if (!("value" in outcome))
      fail(`${where}: a successful outcome needs a JSON "value" (use null for none)`);
    return outcome as CallOutcome;
  }
  const error = outcome.error;
  if (!isRecord(error) || typeof error.name !== "string" || typeof error.message !== "string") {
    fail(`${where}: a failed outcome needs error: { name: string, message: string, code? }`);
  }
  return outcome as CallOutcome;
}

export function checkPendingCalls(calls: unknown, where: string): PendingCallState[] {
  if (!Array.isArray(calls)) fail(`${where}: pendingCalls must be an array of { callId, toolId, startedAt }`);
  const seen = new Set<string>();
  calls.forEach((call: unknown, index) => {
    const at = `${where}: pendingCalls[${index}]`;
    if (!isRecord(call)) fail(`${at} must be an object { callId, toolId, startedAt }`);
    for (const field of ["callId", "toolId", "startedAt"] as const) {
      if (!isNonEmptyString(call[field])) fail(`${at}.${field} must be a non-empty string`);
    }
    const callId = call.callId as string;
    if (seen.has(callId))
      fail(`${at}.callId "${preview(callId)}" appears twice; call ids must be unique in a run`);
    seen.add(callId);
    if (call.outcome !== undefined) checkOutcome(call.outcome, at);
  });
  return calls as PendingCallState[];
}

export function checkTtlSeconds(
  ttl: unknown,
  where: string,
  code: "invalid_input" | "invalid_config",
): number {
  if (typeof ttl !== "number" || !Number.isInteger(ttl) || ttl < 1 || ttl > 86_400) {
    throw new CodeModeError(
      code,
      `${where}: ttlSeconds must be an integer from 1 to 86400 (got ${describe(ttl)})`,
    );
  }
  return ttl;
}

/** JSON text of a value, or `invalid_input` naming the part that cannot be stored. */
export function toJson(value: unknown, where: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    fail(`${where} cannot be stored as JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (text === undefined) fail(`${where} cannot be stored as JSON (got ${describe(value)})`);
  return text;
}

export function fromJson<T = JsonValue>(text: string): T {
  return JSON.parse(text) as T;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return value.length === 0 ? "an empty string" : `"${preview(value)}"`;
  if (typeof value === "object") return value.constructor?.name ? `a ${value.constructor.name}` : "an object";
  return `${typeof value} ${String(value)}`;
}
