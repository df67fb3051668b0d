import { createHmac, timingSafeEqual } from "node:crypto";
import type { BackendPendingCall } from "./backend.js";
import type { RunScope } from "./types.js";

/**
 * HMAC-SHA256 over what a durable backend keeps and a resume trusts (scope, snapshot, JSON parts,
 * pending calls, each recorded outcome), shared by the SQLite and Redis backends. A record changed in
 * the store (by whoever can write the file or the Redis server but does not hold the secret) no longer
 * verifies and is never restored.
 */

export const SCOPE_FIELDS = [
  ["agentId", "ag"],
  ["sessionKey", "sk"],
  ["sessionId", "si"],
  ["parentRunId", "pr"],
  ["toolCallId", "tc"],
] as const satisfies ReadonlyArray<readonly [keyof RunScope, string]>;

/** A key of the backend's own, derived from the operator's secret: the sandbox signs snapshots with
 * the secret itself, and one key should not serve two purposes. */
export function deriveRecordKey(secret: Uint8Array, purpose: string): Buffer {
  return createHmac("sha256", secret).update(purpose).digest();
}

/** Length-prefixed parts, so no two different part lists hash the same. */
function framed(mac: ReturnType<typeof createHmac>, parts: Array<string | Uint8Array>): void {
  for (const part of parts) {
    const bytes = typeof part === "string" ? Buffer.from(part, "utf8") : part;
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(bytes.byteLength));
    mac.update(length);
    mac.update(bytes);
  }
}

/** The MAC of a list of parts under `key`, the first part naming what is signed. */
export function macOf(key: Buffer, parts: Array<string | Uint8Array>): Buffer {
  const mac = createHmac("sha256", key);
  framed(mac, parts);
  return mac.digest();
}

/** The signed parts of a run record (its calls as id plus signed call JSON, in order). */
export type SignedRecord = {
  runId: string;
  scope: RunScope;
  snapshot: Uint8Array;
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
};

export function recordMac(
  key: Buffer,
  label: string,
  record: SignedRecord,
  calls: ReadonlyArray<readonly [string, string]>,
): Buffer {
  return macOf(key, [
    label,
    record.runId,
    ...SCOPE_FIELDS.map(([field]) => record.scope[field]),
    record.snapshot,
    record.outputJson,
    record.telemetryJson,
    record.hostStateJson ?? "\u0000none",
    ...calls.flat(),
  ]);
}

/** Call id and the call's signed JSON (position, tool, start time), in order. */
export function callEntries(
  calls: ReadonlyArray<Pick<BackendPendingCall, "callId" | "toolId" | "startedAt">>,
) {
  return calls.map(
    (call, position) =>
      [call.callId, JSON.stringify({ position, toolId: call.toolId, startedAt: call.startedAt })] as const,
  );
}

export function outcomeMac(
  key: Buffer,
  label: string,
  runId: string,
  callId: string,
  outcomeJson: string,
  settledAt: string,
): Buffer {
  return macOf(key, [label, runId, callId, outcomeJson, settledAt]);
}

/** Constant-time comparison with a stored MAC (raw bytes, or base64 text as Redis keeps it). */
export function sameMac(expected: Buffer, given: Uint8Array | string | null | undefined): boolean {
  if (given === undefined || given === null) return false;
  const actual = typeof given === "string" ? Buffer.from(given, "base64") : Buffer.from(given);
  return actual.byteLength === expected.byteLength && timingSafeEqual(actual, expected);
}
