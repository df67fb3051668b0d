import { CodeModeError } from "@codecell/contract";

/**
 * The errors a caller gets when the store refuses a run: each says what happened to the run and what
 * to do next, and an unknown run reads the same whether it never existed or belongs to another scope.
 */

export function unknownRun(runId: string): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `unknown runId "${runId}": no suspended run with this id is waiting for this caller. ` +
      'Pass the runId of the latest "waiting" result that exec or wait returned in this session.',
  );
}

export function expiredRun(runId: string): CodeModeError {
  return new CodeModeError(
    "snapshot_expired",
    `run "${runId}" expired: it waited longer than its snapshot TTL (snapshotTtlSeconds) and its snapshot was deleted. ` +
      "Run the work again with exec.",
  );
}

export function abortedRun(runId: string): CodeModeError {
  return new CodeModeError(
    "aborted",
    `run "${runId}" was aborted (its agent run or session was aborted or ended) and its snapshot was deleted. ` +
      "Start the work again with exec if it is still needed.",
  );
}

export function runTooLarge(bytes: number, snapshotBytes: number, maxSnapshotBytes: number): CodeModeError {
  return new CodeModeError(
    "snapshot_limit_exceeded",
    `the suspended run needs ${bytes} bytes (snapshot ${snapshotBytes}, state and results ${bytes - snapshotBytes}), ` +
      `over maxSnapshotBytes ${maxSnapshotBytes}. Keep less data alive across awaits, or raise maxSnapshotBytes.`,
    { bytes, snapshotBytes, maxSnapshotBytes },
  );
}

/**
 * The store refused a new run: its principal holds its share of live runs, or the store holds all it
 * may. The message and details give the caller's own count and the caps only, never how many runs
 * other principals hold. `cap` and `principalCap` are a shared backend's deployment caps (per live
 * replica times the replicas).
 */
export function storeFull(
  full: {
    limit: "principal" | "store";
    own: number;
    cap?: number | undefined;
    principalCap?: number | undefined;
  },
  limits: { maxLiveRuns: number; maxLiveRunsPerPrincipal: number },
): CodeModeError {
  const perReplica = (name: string, value: number, deployment: number | undefined) =>
    deployment === undefined ? `${value} (${name})` : `${deployment} (${name} ${value} per live replica)`;
  const principalLimit = perReplica(
    "maxLiveRunsPerPrincipal",
    limits.maxLiveRunsPerPrincipal,
    full.principalCap,
  );
  const details = {
    live: full.own,
    maxLiveRunsPerPrincipal: full.principalCap ?? limits.maxLiveRunsPerPrincipal,
  };
  if (full.limit === "principal") {
    return new CodeModeError(
      "snapshot_limit_exceeded",
      `cannot suspend the run: this caller already has ${full.own} suspended runs live, its limit is ${principalLimit}. ` +
        "Waiting runs are never evicted; resume, finish or abort some of yours, or raise maxLiveRunsPerPrincipal.",
      details,
    );
  }
  return new CodeModeError(
    "snapshot_limit_exceeded",
    `cannot suspend the run: the store holds as many suspended runs as it may, the limit is ${perReplica("maxLiveRuns", limits.maxLiveRuns, full.cap)}; ` +
      `this caller has ${full.own} of them (its own limit is ${principalLimit}). ` +
      "Waiting runs are never evicted; resume, finish or abort some of yours, try again later, or raise maxLiveRuns.",
    { ...details, maxLiveRuns: full.cap ?? limits.maxLiveRuns },
  );
}

export function alreadyClaimed(runId: string): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `run "${runId}" is already being resumed by another wait call; only one wait can resume a run at a time. ` +
      "Use the result of that call.",
  );
}

export function alreadyFinished(runId: string, state: string): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `run "${runId}" already ${state}; its result was returned by the call that finished it, and it cannot be resumed again.`,
  );
}

/** A claim used after its lease ran out, or a second time. */
export function claimLost(runId: string, state: string, action: string, claimLeaseMs: number): CodeModeError {
  return new CodeModeError(
    "internal_error",
    `cannot ${action}: this claim on run "${runId}" is no longer valid (the run is ${state}). ` +
      `A claim lasts claimLeaseMs (${claimLeaseMs} ms) and each claim may be used once; claim the run again.`,
  );
}
