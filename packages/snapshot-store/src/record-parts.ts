import type { CodeModeOutput, CodeModeTelemetry } from "@codecell/contract";
import { CodeModeError } from "@codecell/contract";
import type { BackendPendingCall, BackendRecord } from "./backend.js";
import { utf8Bytes } from "./scope.js";
import type { CallOutcome, ClaimedRun, SuspendPayload } from "./types.js";
import { checkPendingCalls, checkSnapshot, checkTtlSeconds, fromJson, toJson } from "./validation.js";

/**
 * A suspended run as the backend keeps it and back: JSON parts serialized once, here, so every backend
 * stores the same text and `bytes` (snapshot plus every JSON part, outcomes included) means the same
 * thing everywhere.
 */

export type RecordParts = {
  snapshot: Uint8Array;
  pendingCalls: BackendPendingCall[];
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
  ttlSeconds: number;
  bytes: number;
};

function callBytes(call: { callId: string; toolId: string; startedAt: string }): number {
  return utf8Bytes(call.callId) + utf8Bytes(call.toolId) + utf8Bytes(call.startedAt);
}

/** Checks a suspend payload and serializes its parts; `clock` dates an outcome given without `settledAt`. */
export function recordParts(
  payload: SuspendPayload | undefined,
  where: string,
  defaultTtlSeconds: number,
  clock: () => number,
): RecordParts {
  if (typeof payload !== "object" || payload === null) {
    throw new CodeModeError(
      "invalid_input",
      `${where}: expected { snapshot, pendingCalls, output, telemetry }`,
    );
  }
  const snapshot = checkSnapshot(payload.snapshot, where);
  const calls = checkPendingCalls(payload.pendingCalls, where);
  const ttlSeconds =
    payload.ttlSeconds === undefined
      ? defaultTtlSeconds
      : checkTtlSeconds(payload.ttlSeconds, where, "invalid_input");
  const outputJson = toJson(payload.output ?? [], `${where}: output`);
  const telemetryJson = toJson(payload.telemetry ?? null, `${where}: telemetry`);
  const hostStateJson =
    payload.hostState === undefined ? null : toJson(payload.hostState, `${where}: hostState`);
  let bytes = snapshot.byteLength + utf8Bytes(outputJson) + utf8Bytes(telemetryJson);
  if (hostStateJson !== null) bytes += utf8Bytes(hostStateJson);
  const pendingCalls: BackendPendingCall[] = calls.map((call) => {
    const outcomeJson =
      call.outcome === undefined ? null : toJson(call.outcome, `${where}: outcome of ${call.callId}`);
    bytes += callBytes(call) + (outcomeJson === null ? 0 : utf8Bytes(outcomeJson));
    return {
      callId: call.callId,
      toolId: call.toolId,
      startedAt: call.startedAt,
      outcomeJson,
      settledAt: outcomeJson === null ? null : (call.settledAt ?? new Date(clock()).toISOString()),
    };
  });
  return { snapshot, pendingCalls, outputJson, telemetryJson, hostStateJson, ttlSeconds, bytes };
}

function toPendingCallState(call: BackendPendingCall) {
  const state: ClaimedRun["pendingCalls"][number] = {
    callId: call.callId,
    toolId: call.toolId,
    startedAt: call.startedAt,
  };
  if (call.outcomeJson !== null) state.outcome = fromJson<CallOutcome>(call.outcomeJson);
  if (call.settledAt !== null) state.settledAt = call.settledAt;
  return state;
}

/** A claimed record with its JSON parts parsed again, as `claim` hands it to the caller. */
export function claimedRun(runId: string, record: BackendRecord, claimToken: string): ClaimedRun {
  return {
    runId,
    scope: record.scope,
    claimToken,
    snapshot: record.snapshot,
    pendingCalls: record.pendingCalls.map(toPendingCallState),
    output: fromJson<CodeModeOutput[]>(record.outputJson),
    telemetry: fromJson<CodeModeTelemetry>(record.telemetryJson),
    hostState: record.hostStateJson === null ? undefined : fromJson(record.hostStateJson),
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
    resumeCount: record.resumeCount,
  };
}
