export type {
  BackendClaimAnswer,
  BackendClaimedAnswer,
  BackendInsertAnswer,
  BackendPendingCall,
  BackendRecord,
  BackendSettleAnswer,
  ClaimRequest,
  DroppedRun,
  FinishRequest,
  HostPutAnswer,
  HostRecordQuota,
  LiveRunCaps,
  OutcomeWatcher,
  ReplaceRequest,
  SettleRequest,
  SnapshotBackend,
} from "./backend.js";
export type { HostRecordKey } from "./host-record-key.js";
export { MemorySnapshotBackend } from "./memory-backend.js";
export {
  type RedisSentinelAddress,
  RedisSnapshotBackend,
  type RedisSnapshotBackendOptions,
} from "./redis-backend.js";
export { newRunId, RUN_ID_RANDOM_BYTES } from "./run-id.js";
export { callerMatches, principalOf, selectorMatches } from "./scope.js";
export {
  keyFileFor,
  loadSnapshotKey,
  MIN_SNAPSHOT_KEY_BYTES,
  type SnapshotKeySource,
} from "./snapshot-key.js";
export { openSnapshotStore, SnapshotStore } from "./snapshot-store.js";
export { SqliteSnapshotBackend, type SqliteSnapshotBackendOptions } from "./sqlite-backend.js";
export {
  DEFAULT_HOST_RECORD_LIMITS,
  DEFAULT_MAX_LIVE_RUNS,
  type SnapshotStoreOptions,
} from "./store-options.js";
export {
  type AbortReason,
  CALLER_SCOPE_FIELDS,
  type CallerScope,
  type CallOutcome,
  type ClaimedRun,
  type PendingCall,
  type PendingCallState,
  type RecoveryReport,
  RUN_SCOPE_FIELDS,
  type RunScope,
  type RunSelector,
  type RunState,
  type SettleResult,
  type SnapshotEventReason,
  type SnapshotStoreEvent,
  type StoredRun,
  type StoreStats,
  type SuspendInput,
  type SuspendPayload,
  type SweepReport,
} from "./types.js";
