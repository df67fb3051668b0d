import type { BackendClaimAnswer } from "./backend.js";
import type { CallerScope, RunScope, RunSelector, RunState } from "./types.js";

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

/**
 * The principal a run belongs to, for its share of the live-run cap: runs of the same agentId and
 * sessionKey are one principal's (the gateway's sessionKey is `principal:<token name>`).
 */
export function principalOf(scope: RunScope): string {
  return JSON.stringify([scope.agentId, scope.sessionKey]);
}

/** UTF-8 byte length of a string, what a record's JSON parts cost. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * What a claim answers from a record's state alone, the same for every backend: a refusal, `"expire"`
 * when the record is live but past its TTL (the backend turns it into a tombstone), or null when the
 * record may be claimed.
 */
export function claimDecision(
  state: RunState,
  leaseUntil: number,
  expiresAt: number,
  now: number,
): Exclude<BackendClaimAnswer, { status: "claimed" }> | "expire" | null {
  switch (state) {
    case "aborted":
      return { status: "aborted" };
    case "expired":
      return { status: "expired", bytes: 0, justExpired: false };
    case "completed":
    case "failed":
      return { status: "finished", state };
    case "running":
      if (leaseUntil > now) return { status: "busy" };
      break;
    case "waiting":
      break;
  }
  return expiresAt <= now ? "expire" : null;
}
