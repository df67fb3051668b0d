import type {
  CodeModeErrorCode,
  CodeModeOutput,
  CodeModeTelemetry,
  JsonValue,
  SnapshotEvent,
} from "@codecell/contract";

/**
 * Who a suspended run belongs to. A resume must present exactly the same five values; anything else is
 * answered as if the run did not exist.
 */
export type RunScope = {
  agentId: string;
  sessionKey: string;
  sessionId: string;
  /** The host's agent run that made the exec call. */
  parentRunId: string;
  /** The exec tool call that started the code-mode run. */
  toolCallId: string;
};

export const RUN_SCOPE_FIELDS = ["agentId", "sessionKey", "sessionId", "parentRunId", "toolCallId"] as const;

/**
 * Who is asking to resume: the run's scope without `toolCallId`, because a `wait` is a tool call of its
 * own and cannot present the exec call's id. Agent, session and agent run must all match.
 */
export type CallerScope = Omit<RunScope, "toolCallId">;

export const CALLER_SCOPE_FIELDS = ["agentId", "sessionKey", "sessionId", "parentRunId"] as const;

/** The run state machine of the spec. Only `waiting` and `running` records are live. */
export type RunState = "running" | "waiting" | "completed" | "failed" | "expired" | "aborted";

/** A nested tool call that was in flight when the run suspended. */
export type PendingCall = {
  /** The bridge request id inside the run. */
  callId: string;
  /** The catalog id of the nested tool. */
  toolId: string;
  /** ISO time the call started. */
  startedAt: string;
};

/** How a nested call ended, as the guest will see it: plain JSON, never a host object. */
export type CallOutcome =
  | { ok: true; value: JsonValue }
  | { ok: false; error: { name: string; message: string; code?: CodeModeErrorCode } };

/** A pending call and, once it has settled, its outcome. */
export type PendingCallState = PendingCall & { outcome?: CallOutcome; settledAt?: string };

/** What the engine hands over when a run suspends (first time or again). */
export type SuspendPayload = {
  /** The compressed VM snapshot; opaque to the store. */
  snapshot: Uint8Array;
  /**
   * Nested calls still owed to the guest. A call may already carry its outcome (it settled between
   * the snapshot and this write); one without gets it later through `settleCall`.
   */
  pendingCalls: PendingCallState[];
  output: CodeModeOutput[];
  telemetry: CodeModeTelemetry;
  /** Engine-owned JSON (for example the bridge's request table); stored and returned untouched. */
  hostState?: JsonValue;
  /** Overrides the store's default TTL for this record. */
  ttlSeconds?: number;
};

export type SuspendInput = SuspendPayload & {
  scope: RunScope;
  /**
   * The run id to store the run under, when the caller chose it before the run suspended (the engine
   * does, so nested calls made before suspension carry the id the model will get). It must come from
   * `newRunId()`; a malformed one is `invalid_input`, one already in the store `internal_error`.
   * Default: a fresh one.
   */
  runId?: string;
};

/** What `suspend` and `resuspend` return. */
export type StoredRun = {
  runId: string;
  /** Epoch milliseconds after which the run can no longer be resumed. */
  expiresAt: number;
  /** Bytes the record occupies: snapshot plus its JSON parts. */
  bytes: number;
};

/** A run held for resumption. Pass it back to exactly one of `resuspend`, `finish` or `release`. */
export type ClaimedRun = {
  runId: string;
  scope: RunScope;
  /** Identifies this claim; a stale claim (after a lease timeout) cannot change the record. */
  claimToken: string;
  snapshot: Uint8Array;
  pendingCalls: PendingCallState[];
  output: CodeModeOutput[];
  telemetry: CodeModeTelemetry;
  hostState: JsonValue | undefined;
  createdAt: number;
  expiresAt: number;
  /** How many times this run has been claimed before, this claim included. */
  resumeCount: number;
};

/** The answer of `settleCall`. Only `recorded` changed the record. */
export type SettleResult =
  | "recorded"
  /** Recorded, but the outcome was too big for the record and was replaced by an error outcome. */
  | "recorded_as_too_large"
  | "already_settled"
  /** The run exists but has no pending call with that id. */
  | "unknown_call"
  /** The run is unknown, finished, expired or aborted: nothing is recorded. */
  | "run_gone";

/** Selects runs to abort: every given field must match; at least one field is required. */
export type RunSelector = Partial<RunScope> & { runId?: string };

export type AbortReason = "run_aborted" | "session_aborted" | "session_ended" | (string & {});

/** Why a run was deleted or refused; for operator logs, never shown to the model. */
export type SnapshotEventReason =
  | "completed"
  | "failed"
  | "shutdown"
  | "purged"
  | "unknown_run"
  | "scope_mismatch"
  | "already_claimed"
  | "finished"
  | "expired"
  | "aborted"
  | "too_large"
  | "store_full"
  | AbortReason;

/** A lifecycle event, for telemetry and logs. */
export type SnapshotStoreEvent = {
  event: SnapshotEvent;
  runId: string;
  /** Record bytes, where known. */
  bytes?: number;
  reason?: SnapshotEventReason;
  /** Epoch milliseconds. */
  at: number;
};

/** What reopening a durable store repaired. */
export type RecoveryReport = {
  /** Live runs found in the store when it opened. */
  liveRuns: number;
  /** Runs that were claimed when the previous process died, put back to `waiting`. */
  requeuedRuns: number;
  /** Nested calls in flight when the previous process died, now settled as failed. */
  interruptedCalls: number;
};

export type SweepReport = {
  /** Runs whose TTL passed: now `expired`, snapshot deleted. */
  expired: number;
  /** Tombstones (finished, expired, aborted) past their retention, removed for good. */
  purged: number;
};

export type StoreStats = {
  live: number;
  waiting: number;
  running: number;
  /** Finished, expired or aborted runs kept briefly so `wait` can say why a run is gone. */
  tombstones: number;
  /** Bytes held by live records. */
  liveBytes: number;
};
