import { CODE_MODE_LIMITS, CodeModeError } from "@codecell/contract";
import type { SnapshotBackend } from "./backend.js";
import type { SnapshotStoreEvent } from "./types.js";
import { checkTtlSeconds } from "./validation.js";

export type SnapshotStoreOptions = {
  /** Where records live. Default: a new in-process memory backend. */
  backend?: SnapshotBackend;
  /** Cap on one record: snapshot plus JSON parts. Default: the config default (10 MiB). */
  maxSnapshotBytes?: number;
  /** Default TTL of a waiting run. Default: the config default (900). */
  snapshotTtlSeconds?: number;
  /** Live (waiting or running) records allowed at once. Default 64. */
  maxLiveRuns?: number;
  /**
   * Live records one principal (a run scope's agentId and sessionKey together) may hold at once, so one
   * principal's waiting runs never fill the store for everyone. At most `maxLiveRuns`. Default: half of
   * `maxLiveRuns`, rounded up (32 of 64).
   */
  maxLiveRunsPerPrincipal?: number;
  /**
   * Host records (an agent endpoint's transcripts and stored responses) one principal (the record's
   * owner) may keep at once. Past it, the principal's own oldest finished record is evicted; when all
   * of its records are in use, the put is refused. Default 256.
   */
  maxHostRecordsPerPrincipal?: number;
  /** Bytes of host records one principal may keep at once, evicted and refused as above. Default 64 MiB. */
  maxHostRecordBytesPerPrincipal?: number;
  /**
   * Bytes of host records of every principal together. Past it, finished records are evicted oldest
   * first, whoever's; when what is left is in use, the put is refused. At least
   * `maxHostRecordBytesPerPrincipal`. Default 256 MiB.
   */
  maxHostRecordBytes?: number;
  /** How long a claim holds a run before another claim may take it over. Default 120000. */
  claimLeaseMs?: number;
  /** How long finished, expired and aborted runs are remembered, so `wait` can say why. Default 3600. */
  tombstoneSeconds?: number;
  /** Period of the background TTL sweep; 0 turns the timer off (lazy refusal still applies). Default 30000. */
  sweepIntervalMs?: number;
  /** Receives lifecycle events. A listener that throws is reported once as a process warning. */
  onEvent?: (event: SnapshotStoreEvent) => void;
  /** Milliseconds since the epoch; injectable for tests. Default `Date.now`. */
  clock?: () => number;
};

export const DEFAULT_MAX_LIVE_RUNS = 64;
const MIB = 1024 * 1024;
/** Defaults of the host-record quotas: a handful of full 10 MiB transcripts per principal, four times that in all. */
export const DEFAULT_HOST_RECORD_LIMITS = {
  maxHostRecordsPerPrincipal: 256,
  maxHostRecordBytesPerPrincipal: 64 * MIB,
  maxHostRecordBytes: 256 * MIB,
} as const;
const DEFAULT_CLAIM_LEASE_MS = 120_000;
const DEFAULT_TOMBSTONE_SECONDS = 3_600;
const DEFAULT_SWEEP_INTERVAL_MS = 30_000;

/** The store's numeric limits, checked (`invalid_config` for a bad one) and with their defaults. */
export type StoreLimits = {
  maxSnapshotBytes: number;
  snapshotTtlSeconds: number;
  maxLiveRuns: number;
  maxLiveRunsPerPrincipal: number;
  claimLeaseMs: number;
  tombstoneSeconds: number;
  sweepIntervalMs: number;
  maxHostRecordsPerPrincipal: number;
  maxHostRecordBytesPerPrincipal: number;
  maxHostRecordBytes: number;
};

function positiveInteger(
  value: number | undefined,
  fallback: number,
  name: string,
  allowZero = false,
): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new CodeModeError(
      "invalid_config",
      `snapshot store option ${name} must be a ${allowZero ? "non-negative" : "positive"} integer (got ${String(value)})`,
    );
  }
  return value;
}

export function storeLimits(options: SnapshotStoreOptions): StoreLimits {
  const maxLiveRuns = positiveInteger(options.maxLiveRuns, DEFAULT_MAX_LIVE_RUNS, "maxLiveRuns");
  const maxLiveRunsPerPrincipal = positiveInteger(
    options.maxLiveRunsPerPrincipal,
    Math.ceil(maxLiveRuns / 2),
    "maxLiveRunsPerPrincipal",
  );
  if (maxLiveRunsPerPrincipal > maxLiveRuns) {
    throw new CodeModeError(
      "invalid_config",
      `snapshot store option maxLiveRunsPerPrincipal (${maxLiveRunsPerPrincipal}) must not be above maxLiveRuns (${maxLiveRuns}); lower it or raise maxLiveRuns.`,
    );
  }
  const maxHostRecordBytes = positiveInteger(
    options.maxHostRecordBytes,
    DEFAULT_HOST_RECORD_LIMITS.maxHostRecordBytes,
    "maxHostRecordBytes",
  );
  const maxHostRecordBytesPerPrincipal = positiveInteger(
    options.maxHostRecordBytesPerPrincipal,
    Math.min(DEFAULT_HOST_RECORD_LIMITS.maxHostRecordBytesPerPrincipal, maxHostRecordBytes),
    "maxHostRecordBytesPerPrincipal",
  );
  if (maxHostRecordBytesPerPrincipal > maxHostRecordBytes) {
    throw new CodeModeError(
      "invalid_config",
      `snapshot store option maxHostRecordBytesPerPrincipal (${maxHostRecordBytesPerPrincipal}) must not be above maxHostRecordBytes (${maxHostRecordBytes}); lower it or raise maxHostRecordBytes.`,
    );
  }
  return {
    maxHostRecordsPerPrincipal: positiveInteger(
      options.maxHostRecordsPerPrincipal,
      DEFAULT_HOST_RECORD_LIMITS.maxHostRecordsPerPrincipal,
      "maxHostRecordsPerPrincipal",
    ),
    maxHostRecordBytesPerPrincipal,
    maxHostRecordBytes,
    maxSnapshotBytes: positiveInteger(
      options.maxSnapshotBytes,
      CODE_MODE_LIMITS.maxSnapshotBytes.default,
      "maxSnapshotBytes",
    ),
    snapshotTtlSeconds:
      options.snapshotTtlSeconds === undefined
        ? CODE_MODE_LIMITS.snapshotTtlSeconds.default
        : checkTtlSeconds(
            options.snapshotTtlSeconds,
            "snapshot store option snapshotTtlSeconds",
            "invalid_config",
          ),
    maxLiveRuns,
    maxLiveRunsPerPrincipal,
    claimLeaseMs: positiveInteger(options.claimLeaseMs, DEFAULT_CLAIM_LEASE_MS, "claimLeaseMs"),
    tombstoneSeconds: positiveInteger(
      options.tombstoneSeconds,
      DEFAULT_TOMBSTONE_SECONDS,
      "tombstoneSeconds",
    ),
    sweepIntervalMs: positiveInteger(
      options.sweepIntervalMs,
      DEFAULT_SWEEP_INTERVAL_MS,
      "sweepIntervalMs",
      true,
    ),
  };
}
