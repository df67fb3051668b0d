import type { CallerScope, RunScope, RunSelector } from "./types.js";

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

/** True when the caller may resume a run of this scope: same agent, session key, session and agent run. */
export function callerMatches(scope: RunScope, caller: CallerScope): boolean {
  return (
    scope.agentId === caller.agentId &&
    scope.sessionKey === caller.sessionKey &&
    scope.sessionId === caller.sessionId &&
    scope.parentRunId === caller.parentRunId
  );
}

/** UTF-8 byte length of a string, what a record's JSON parts cost. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
