import type { BackendPendingCall } from "./backend.js";
import type { CallOutcome } from "./types.js";
import { preview } from "./validation.js";

/**
 * Outcomes the store records for a nested call in place of its own, when that one is lost or cannot fit.
 * Each is a `CodeModeError` outcome the guest sees like any failed call, worded so the model can decide
 * whether to call again.
 */

/**
 * What a restart leaves for a call that was in flight: a failure, since its process is gone. A call of
 * a client tool (`client:...`) was handed out to the client, which answers it whatever happened to this
 * process, so it is left pending (null) for the client's result.
 */
export function interruptedOutcomeJson(call: BackendPendingCall): string | null {
  if (call.toolId.startsWith("client:")) return null;
  return JSON.stringify({
    ok: false,
    error: {
      name: "CodeModeError",
      code: "nested_tool_failed",
      message:
        `nested call to ${call.toolId} (call ${call.callId}) was interrupted by restart: the host process stopped ` +
        "before the call settled, so its result is lost. Call it again if repeating it is safe.",
    },
  } satisfies CallOutcome);
}

/** A call whose replica stopped renewing its lease on a shared backend. */
export function replicaGoneOutcome(callId: string, toolId: string): CallOutcome {
  return {
    ok: false,
    error: {
      name: "CodeModeError",
      code: "nested_tool_failed",
      message:
        `nested call to ${toolId} (call ${callId}) was interrupted: the gateway replica running it stopped, froze or ` +
        "lost its connection to the snapshot store (its lease ran out) before the call settled, so its result is lost. " +
        "Call it again if repeating it is safe.",
    },
  };
}

/** A result too big for the room left in its run's record (`maxSnapshotBytes`). */
export function tooLargeOutcomeJson(
  callId: string,
  outcomeBytes: number,
  recordBytes: number,
  maxSnapshotBytes: number,
): string {
  return JSON.stringify({
    ok: false,
    error: {
      name: "CodeModeError",
      code: "snapshot_limit_exceeded",
      message:
        `the result of nested call ${preview(callId)} was ${outcomeBytes} bytes, more than the ` +
        `${Math.max(0, maxSnapshotBytes - recordBytes)} bytes left in this suspended run (maxSnapshotBytes ` +
        `${maxSnapshotBytes}); ask the tool for less data`,
    },
  } satisfies CallOutcome);
}
