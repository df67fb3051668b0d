import type { RunScope, RunSelector } from "./types.js";

/** True when the run's scope matches every field the selector gives. */
export function selectorMatches(selector: RunSelector, runId: string, scope: RunScope): boolean {
  if (selector.runId !== undefined && selector.runId !== runId) return false;
  if (selector.agentId !== undefined && selector.agentId !== scope.agentId) return false;
  if (selector.sessionKey !== undefined && selector.sessionKey !== scope.sessionKey) return false;
  if (selector.sessionId !== undefined && selector.sessionId !== scope.sessionId) return false;
  if (selector.parentRunId !== undefined && selector.parentRunId !== scope.parentRunId) return false;
  if (selector.toolCallId !== undefined && selector.toolCallId !== scope.toolCallId) return false;
  return true;
}

export function sameScope(a: RunScope, b: RunScope): boolean {
  return (
    a.agentId === b.agentId &&
    a.sessionKey === b.sessionKey &&
    a.sessionId === b.sessionId &&
    a.parentRunId === b.parentRunId &&
    a.toolCallId === b.toolCallId
  );
}

/** UTF-8 byte length of a string, what a record's JSON parts cost. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
