import type { CallerScope, RecoveryReport, RunScope, RunSelector, StoreStats } from "./types.js";

/**
 * The storage contract. `SnapshotStore` owns validation, ids, limits, errors, events and the sweep
 * timer; a backend owns only the records and must make each method atomic on its own (a transaction in
 * SQLite, a Lua script or MULTI/WATCH in Redis). Every method is async so a networked backend fits.
 *
 * JSON parts arrive already serialized, so every backend stores and returns the same text and the
 * store's byte counts mean the same thing everywhere.
 */
export interface SnapshotBackend {
  /** A short name for logs and benchmarks: "memory", "sqlite". */
  readonly kind: string;
  /** True when records outlive the process. A non-durable backend drops everything on `close`. */
  readonly durable: boolean;

  /**
   * Called once when the store opens. A durable backend repairs what a dead process left: claimed
   * runs go back to `waiting`, and calls without an outcome get `interruptedOutcome(call)` (null: the
   * call stays pending, because something outside the process answers it).
   */
  recover(
    now: number,
    interruptedOutcome: (call: BackendPendingCall) => string | null,
  ): Promise<RecoveryReport>;

  /**
   * Adds a `waiting` record unless its principal (the scope's agentId and sessionKey) holds
   * `maxLiveRunsPerPrincipal` live records, or `maxLiveRuns` live records exist in all (both checked
   * atomically with the insert). A backend shared by replicas counts both caps per live replica and
   * answers the deployment's caps. `tombstoneMs` (the store's tombstone retention) lets a backend with
   * its own expiry keep the record long enough to explain why it is gone.
   */
  insert(record: BackendRecord, caps: LiveRunCaps, tombstoneMs?: number): Promise<BackendInsertAnswer>;

  /** Records a pending call's outcome on a live record, first outcome wins. */
  settle(request: SettleRequest): Promise<BackendSettleAnswer>;

  /**
   * Takes a `waiting` record (or a `running` one whose lease ran out) for resumption, checking scope
   * and expiry. An expired live record becomes an `expired` tombstone here (lazy refusal).
   */
  claim(request: ClaimRequest): Promise<BackendClaimAnswer>;

  /** Replaces a claimed record's snapshot and parts and puts it back to `waiting`. */
  replace(request: ReplaceRequest): Promise<BackendClaimedAnswer<{ bytes: number }>>;

  /** Gives a claimed record back unchanged, as `waiting`. */
  release(runId: string, claimToken: string): Promise<BackendClaimedAnswer<object>>;

  /** Ends a claimed run: it becomes a `completed`/`failed` tombstone until `purgeAt`. */
  finish(request: FinishRequest): Promise<BackendClaimedAnswer<{ bytes: number }>>;

  /** Turns every live record matching the selector into an `aborted` tombstone until `purgeAt`. */
  abort(selector: RunSelector, purgeAt: number): Promise<DroppedRun[]>;

  /** Expires live records past their TTL (not those under a valid claim) and purges old tombstones. */
  sweep(now: number, purgeAt: number): Promise<{ expired: DroppedRun[]; purged: number }>;

  stats(): Promise<StoreStats>;

  /**
   * Only for a backend shared by several processes: delivers the outcomes of a run's calls as they are
   * recorded anywhere (already recorded ones first), and tells when a call's owning process is gone.
   * Resolves once listening; call the returned function to stop.
   */
  watchOutcomes?(
    runId: string,
    callIds: readonly string[],
    watcher: OutcomeWatcher,
  ): Promise<() => Promise<void>>;

  /**
   * Host records: small JSON values a host keeps beside its runs (an agent endpoint's hidden transcript
   * and the client calls it waits for), under a key the store builds from kind, owner and id. `put`
   * replaces; a record past `expiresAt` reads as absent. `delete` answers whether this call removed it,
   * so get-then-delete is how a host takes a record exactly once.
   */
  putHostRecord(
    key: string,
    valueJson: string,
    expiresAt: number,
    quota?: HostRecordQuota,
  ): Promise<HostPutAnswer | undefined>;
  getHostRecord(key: string, now: number): Promise<string | null>;
  deleteHostRecord(key: string): Promise<boolean>;
  /**
   * A lease under a host-record key, in one atomic step: written (value `holder`, until `expiresAt`)
   * when there is no live record under the key or the live one holds `holder` (a renewal). True when
   * the caller holds the lease now; false while another holder's lease lives.
   */
  leaseHostRecord(key: string, holder: string, expiresAt: number, now: number): Promise<boolean>;
  /** Deletes the record under `key` only while it holds `holder`, in one atomic step; true when it did. */
  releaseHostRecord(key: string, holder: string): Promise<boolean>;

  /** Releases resources. A non-durable backend returns the live runs it dropped. */
  close(): Promise<DroppedRun[]>;
}

/**
 * What a host record put asks of the backend besides the write, atomically with it: the writer's
 * (`owner`'s) quota of records and bytes and the store's byte budget over every owner, made room for by
 * evicting finished (`evictable`) records, the owner's own oldest first, then anyone's oldest first
 * (see `planHostPut`). Leases never count and are never evicted.
 */
export type HostRecordQuota = {
  owner: string;
  /** UTF-8 bytes of the value. */
  bytes: number;
  now: number;
  /** False while the record is in use (a run waits on it): it is never evicted, only expires. */
  evictable: boolean;
  maxRecordsPerOwner: number;
  maxBytesPerOwner: number;
  maxBytes: number;
};

/** `full`: nothing was written or evicted; `ownRecords`/`ownBytes` are the writer's own use only. */
export type HostPutAnswer =
  | { status: "ok"; evicted: number }
  | { status: "full"; limit: "owner" | "store"; ownRecords: number; ownBytes: number };

export type LiveRunCaps = { maxLiveRuns: number; maxLiveRunsPerPrincipal: number };

/**
 * `full`: `own` is the live records of the new record's principal (never anyone else's count); `limit`
 * says which cap was reached; `cap` and `principalCap` are the deployment's caps where a shared backend
 * scales them with its replicas.
 */
export type BackendInsertAnswer =
  | { status: "ok" }
  | { status: "full"; limit: "principal" | "store"; own: number; cap?: number; principalCap?: number }
  | { status: "taken" };

export type BackendPendingCall = {
  callId: string;
  toolId: string;
  startedAt: string;
  outcomeJson: string | null;
  settledAt: string | null;
};

/** A live record as the store writes it and a claim reads it back. */
export type BackendRecord = {
  runId: string;
  scope: RunScope;
  snapshot: Uint8Array;
  pendingCalls: BackendPendingCall[];
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
  createdAt: number;
  updatedAt: number;
  expiresAt: number;
  /** Snapshot bytes plus the UTF-8 bytes of every JSON part, outcomes included. */
  bytes: number;
  resumeCount: number;
};

export type SettleRequest = {
  runId: string;
  callId: string;
  outcomeJson: string;
  outcomeBytes: number;
  settledAt: string;
  /** The record may not grow past this; answer `too_large` instead. */
  maxBytes: number;
};

export type BackendSettleAnswer =
  | { status: "recorded" | "already_settled" | "unknown_call" | "run_gone" }
  | { status: "too_large"; bytes: number };

export type ClaimRequest = {
  runId: string;
  /** Compare with `callerMatches`; a mismatch answers `scope_mismatch`, before any state is revealed. */
  caller: CallerScope;
  now: number;
  claimToken: string;
  leaseUntil: number;
  /** Purge time for the tombstone if the record turns out to be expired. */
  purgeAt: number;
};

export type BackendClaimAnswer =
  | { status: "claimed"; record: BackendRecord }
  | { status: "unknown" | "scope_mismatch" | "busy" | "aborted" }
  | { status: "expired"; bytes: number; justExpired: boolean }
  | { status: "finished"; state: "completed" | "failed" };

/** Answers of operations that need a valid claim: `lost` tells the state the record is in instead. */
export type BackendClaimedAnswer<T extends object> =
  | ({ status: "ok" } & T)
  | { status: "lost"; state: "waiting" | "running" | "completed" | "failed" | "expired" | "aborted" | "gone" }
  | { status: "too_large"; bytes: number };

export type ReplaceRequest = {
  runId: string;
  claimToken: string;
  snapshot: Uint8Array;
  /** The calls still owed. Outcomes already recorded for the same callIds are kept. */
  pendingCalls: BackendPendingCall[];
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
  updatedAt: number;
  expiresAt: number;
  /** Bytes of everything above except the outcomes kept from the old record. */
  baseBytes: number;
  maxBytes: number;
};

export type FinishRequest = {
  runId: string;
  claimToken: string;
  state: "completed" | "failed";
  purgeAt: number;
};

export type DroppedRun = { runId: string; bytes: number };

/** Receives what `watchOutcomes` learns about a run's calls. */
export type OutcomeWatcher = {
  outcome(callId: string, outcomeJson: string): void;
  /**
   * The process running the call stopped renewing its lease: the call will never settle there. Settles
   * it (as interrupted); a rejection means the store could not be reached, and the watch asks again.
   */
  ownerGone(callId: string, toolId: string): Promise<void>;
};
