import { randomBytes } from "node:crypto";
import type { JsonValue, SnapshotEvent } from "@codecell/contract";
import { CodeModeError } from "@codecell/contract";
import type { BackendClaimedAnswer, DroppedRun, HostRecordQuota, SnapshotBackend } from "./backend.js";
import { type HostRecordKey, hostRecordKey } from "./host-record-key.js";
import { hostRecordRefusal } from "./host-record-quota.js";
import { MemorySnapshotBackend } from "./memory-backend.js";
import { claimedRun, recordParts } from "./record-parts.js";
import { looksLikeRunId, newRunId } from "./run-id.js";
import {
  abortedRun,
  alreadyClaimed,
  alreadyFinished,
  claimLost,
  expiredRun,
  runTooLarge,
  storeFull,
  unknownRun,
} from "./run-refusals.js";
import { utf8Bytes } from "./scope.js";
import { interruptedOutcomeJson, replicaGoneOutcome, tooLargeOutcomeJson } from "./stand-in-outcomes.js";
import { type SnapshotStoreOptions, storeLimits } from "./store-options.js";
import type {
  AbortReason,
  CallerScope,
  CallOutcome,
  ClaimedRun,
  RecoveryReport,
  RunSelector,
  SettleResult,
  SnapshotEventReason,
  SnapshotStoreEvent,
  StoredRun,
  StoreStats,
  SuspendInput,
  SuspendPayload,
  SweepReport,
} from "./types.js";
import {
  checkCallerScope,
  checkOutcome,
  checkScope,
  checkSelector,
  checkTtlSeconds,
  fromJson,
  preview,
  toJson,
} from "./validation.js";

/** The constructor's options, named where the store is. */
export type { SnapshotStoreOptions } from "./store-options.js";

/** Opens a store over a backend (memory by default), running the backend's restart recovery first. */
export async function openSnapshotStore(options: SnapshotStoreOptions = {}): Promise<SnapshotStore> {
  const store = new SnapshotStore(options);
  await store.open();
  return store;
}

/**
 * Suspended code-mode runs: the engine stores a run when it suspends, records nested call outcomes as
 * they settle, claims the run when `wait` comes, and then suspends it again or finishes it. Limits,
 * scope checks, expiry and lifecycle events live here; storage lives in the backend.
 */
export class SnapshotStore {
  readonly backend: SnapshotBackend;
  readonly maxSnapshotBytes: number;
  readonly snapshotTtlSeconds: number;
  readonly maxLiveRuns: number;
  readonly maxLiveRunsPerPrincipal: number;
  readonly claimLeaseMs: number;
  readonly tombstoneSeconds: number;
  readonly maxHostRecordsPerPrincipal: number;
  readonly maxHostRecordBytesPerPrincipal: number;
  readonly maxHostRecordBytes: number;
  readonly #sweepIntervalMs: number;
  readonly #onEvent: ((event: SnapshotStoreEvent) => void) | undefined;
  readonly #clock: () => number;
  #timer: NodeJS.Timeout | undefined;
  #sweeping = false;
  #state: "new" | "open" | "closed" = "new";
  #listenerWarned = false;
  #recovery: RecoveryReport = { liveRuns: 0, requeuedRuns: 0, interruptedCalls: 0 };

  /** Prefer `openSnapshotStore`; a store made with `new` must be `open()`ed before use. */
  constructor(options: SnapshotStoreOptions = {}) {
    this.backend = options.backend ?? new MemorySnapshotBackend();
    const limits = storeLimits(options);
    this.maxSnapshotBytes = limits.maxSnapshotBytes;
    this.snapshotTtlSeconds = limits.snapshotTtlSeconds;
    this.maxLiveRuns = limits.maxLiveRuns;
    this.maxLiveRunsPerPrincipal = limits.maxLiveRunsPerPrincipal;
    this.claimLeaseMs = limits.claimLeaseMs;
    this.tombstoneSeconds = limits.tombstoneSeconds;
    this.maxHostRecordsPerPrincipal = limits.maxHostRecordsPerPrincipal;
    this.maxHostRecordBytesPerPrincipal = limits.maxHostRecordBytesPerPrincipal;
    this.maxHostRecordBytes = limits.maxHostRecordBytes;
    this.#sweepIntervalMs = limits.sweepIntervalMs;
    this.#onEvent = options.onEvent;
    this.#clock = options.clock ?? Date.now;
  }

  /** What the backend repaired when the store opened (all zeros for a fresh or memory store). */
  get recovery(): RecoveryReport {
    return { ...this.#recovery };
  }

  async open(): Promise<void> {
    if (this.#state !== "new") return;
    this.#recovery = await this.backend.recover(this.#clock(), interruptedOutcomeJson);
    this.#state = "open";
    if (this.#sweepIntervalMs > 0) {
      this.#timer = setInterval(() => void this.#sweepInBackground(), this.#sweepIntervalMs);
      // The sweep must never keep a host process alive on its own.
      this.#timer.unref();
    }
  }

  /** Stores a run that just suspended and returns its new unguessable runId. */
  async suspend(input: SuspendInput): Promise<StoredRun> {
    this.#ensureOpen("suspend");
    const where = "suspend";
    const scope = checkScope(input?.scope, where);
    const parts = recordParts(input, where, this.snapshotTtlSeconds, this.#clock);
    const now = this.#clock();
    if (input.runId !== undefined && (typeof input.runId !== "string" || !looksLikeRunId(input.runId))) {
      throw new CodeModeError(
        "invalid_input",
        `${where}: runId must be a run id from newRunId() (24 base64url characters), got ${preview(String(input.runId))}`,
      );
    }
    const runId = input.runId ?? newRunId();
    if (parts.bytes > this.maxSnapshotBytes) {
      this.#emit("refused", runId, "too_large", parts.bytes);
      throw runTooLarge(parts.bytes, parts.snapshot.byteLength, this.maxSnapshotBytes);
    }
    const answer = await this.backend.insert(
      {
        runId,
        scope,
        snapshot: parts.snapshot,
        pendingCalls: parts.pendingCalls,
        outputJson: parts.outputJson,
        telemetryJson: parts.telemetryJson,
        hostStateJson: parts.hostStateJson,
        createdAt: now,
        updatedAt: now,
        expiresAt: now + parts.ttlSeconds * 1000,
        bytes: parts.bytes,
        resumeCount: 0,
      },
      { maxLiveRuns: this.maxLiveRuns, maxLiveRunsPerPrincipal: this.maxLiveRunsPerPrincipal },
      this.tombstoneSeconds * 1000,
    );
    if (answer.status === "taken") {
      throw new CodeModeError(
        "internal_error",
        `${where}: run id ${runId} is already in the store; suspend a new run under a fresh newRunId().`,
      );
    }
    if (answer.status === "full") {
      this.#emit("refused", runId, "store_full", parts.bytes);
      throw storeFull(answer, this);
    }
    this.#emit("stored", runId, undefined, parts.bytes);
    return { runId, expiresAt: now + parts.ttlSeconds * 1000, bytes: parts.bytes };
  }

  /**
   * Records how a pending nested call ended, while the run waits or runs. The first outcome wins. An
   * outcome too big for the record is replaced by a `snapshot_limit_exceeded` error outcome, so the
   * guest still learns that the call ended.
   */
  async settleCall(runId: string, callId: string, outcome: CallOutcome): Promise<SettleResult> {
    this.#ensureOpen("settleCall");
    const where = `settleCall(${preview(String(runId))}, ${preview(String(callId))})`;
    if (typeof runId !== "string" || typeof callId !== "string") {
      throw new CodeModeError("invalid_input", `${where}: runId and callId must be strings`);
    }
    const outcomeJson = toJson(checkOutcome(outcome, where), `${where}: outcome`);
    const settledAt = new Date(this.#clock()).toISOString();
    const request = { runId, callId, outcomeJson, outcomeBytes: utf8Bytes(outcomeJson), settledAt };
    const answer = await this.backend.settle({ ...request, maxBytes: this.maxSnapshotBytes });
    if (answer.status !== "too_large") return answer.status;
    const replacement = tooLargeOutcomeJson(
      callId,
      request.outcomeBytes,
      answer.bytes,
      this.maxSnapshotBytes,
    );
    // The replacement is a few hundred bytes and must land, or the call could never settle.
    const second = await this.backend.settle({
      ...request,
      outcomeJson: replacement,
      outcomeBytes: utf8Bytes(replacement),
      maxBytes: Number.MAX_SAFE_INTEGER,
    });
    return second.status === "recorded" ? "recorded_as_too_large" : (second.status as SettleResult);
  }

  /**
   * Takes a waiting run for `wait`. The caller's agentId, sessionKey, sessionId and parentRunId must
   * equal the run's (its toolCallId is the wait call's own and is not compared). Throws `invalid_input`
   * "unknown runId" for an unknown id and, word for word, for a run of another scope; `snapshot_expired`;
   * `aborted`; or `invalid_input` when another claim holds the run or the run already finished.
   */
  async claim(runId: string, caller: CallerScope): Promise<ClaimedRun> {
    this.#ensureOpen("claim");
    const checkedCaller = checkCallerScope(caller, "claim");
    const shown = preview(String(runId));
    if (typeof runId !== "string" || !looksLikeRunId(runId)) {
      this.#emit("refused", shown, "unknown_run");
      throw unknownRun(shown);
    }
    const now = this.#clock();
    const claimToken = randomBytes(16).toString("base64url");
    const answer = await this.backend.claim({
      runId,
      caller: checkedCaller,
      now,
      claimToken,
      leaseUntil: now + this.claimLeaseMs,
      purgeAt: this.#purgeAt(now),
    });
    switch (answer.status) {
      case "claimed": {
        const record = answer.record;
        this.#emit("resumed", runId, undefined, record.bytes);
        return claimedRun(runId, record, claimToken);
      }
      case "unknown":
      case "scope_mismatch":
        // The same answer for both, so a caller outside the scope learns nothing about the run.
        this.#emit("refused", runId, answer.status === "unknown" ? "unknown_run" : "scope_mismatch");
        throw unknownRun(shown);
      case "expired":
        if (answer.justExpired) this.#emit("expired", runId, undefined, answer.bytes);
        this.#emit("refused", runId, "expired");
        throw expiredRun(runId);
      case "aborted":
        this.#emit("refused", runId, "aborted");
        throw abortedRun(runId);
      case "busy":
        this.#emit("refused", runId, "already_claimed");
        throw alreadyClaimed(runId);
      case "finished":
        this.#emit("refused", runId, "finished");
        throw alreadyFinished(runId, answer.state);
    }
  }

  /** True once `close()` was called: nothing more can be stored or read. */
  get closed(): boolean {
    return this.#state === "closed";
  }

  /** True when another process may run a call of a run this process resumes (a shared backend). */
  get sharesOutcomes(): boolean {
    return typeof this.backend.watchOutcomes === "function";
  }

  /**
   * Delivers the outcomes of the given calls of a run as they are recorded by any process sharing the
   * backend (those recorded already first). A call whose process stopped renewing its lease is settled
   * as `nested_tool_failed` "interrupted" here, and that outcome is delivered like any other. Answers
   * null for a backend that is not shared (memory, SQLite): there, calls run in this process only.
   */
  async watchOutcomes(
    runId: string,
    callIds: readonly string[],
    onOutcome: (callId: string, outcome: CallOutcome) => void,
  ): Promise<(() => Promise<void>) | null> {
    this.#ensureOpen("watchOutcomes");
    if (this.backend.watchOutcomes === undefined) return null;
    return this.backend.watchOutcomes(runId, callIds, {
      outcome: (callId, outcomeJson) => onOutcome(callId, fromJson<CallOutcome>(outcomeJson)),
      ownerGone: async (callId, toolId) => {
        await this.settleCall(runId, callId, replicaGoneOutcome(callId, toolId));
      },
    });
  }

  /** Suspends a claimed run again with a new snapshot; the runId stays the same, the TTL restarts. */
  async resuspend(claim: ClaimedRun, payload: SuspendPayload): Promise<StoredRun> {
    this.#ensureOpen("resuspend");
    const where = `resuspend(${preview(String(claim?.runId))})`;
    const parts = recordParts(payload, where, this.snapshotTtlSeconds, this.#clock);
    if (parts.bytes > this.maxSnapshotBytes) {
      this.#emit("refused", claim.runId, "too_large", parts.bytes);
      throw runTooLarge(parts.bytes, parts.snapshot.byteLength, this.maxSnapshotBytes);
    }
    const now = this.#clock();
    const expiresAt = now + parts.ttlSeconds * 1000;
    const answer = await this.backend.replace({
      runId: claim.runId,
      claimToken: claim.claimToken,
      snapshot: parts.snapshot,
      pendingCalls: parts.pendingCalls,
      outputJson: parts.outputJson,
      telemetryJson: parts.telemetryJson,
      hostStateJson: parts.hostStateJson,
      updatedAt: now,
      expiresAt,
      baseBytes: parts.bytes,
      maxBytes: this.maxSnapshotBytes,
    });
    if (answer.status === "too_large") {
      this.#emit("refused", claim.runId, "too_large", answer.bytes);
      throw runTooLarge(answer.bytes, parts.snapshot.byteLength, this.maxSnapshotBytes);
    }
    this.#checkClaimAnswer(answer, claim.runId, "suspend it again");
    this.#emit("stored", claim.runId, undefined, answer.status === "ok" ? answer.bytes : parts.bytes);
    return { runId: claim.runId, expiresAt, bytes: answer.status === "ok" ? answer.bytes : parts.bytes };
  }

  /** Puts a claimed run back to `waiting` unchanged (for example when the restore could not start). */
  async release(claim: ClaimedRun): Promise<void> {
    this.#ensureOpen("release");
    const answer = await this.backend.release(claim.runId, claim.claimToken);
    this.#checkClaimAnswer(answer, claim.runId, "release it");
  }

  /** Ends a claimed run as completed or failed: its snapshot is deleted. */
  async finish(claim: ClaimedRun, state: "completed" | "failed"): Promise<void> {
    this.#ensureOpen("finish");
    if (state !== "completed" && state !== "failed") {
      throw new CodeModeError(
        "invalid_input",
        `finish: state must be "completed" or "failed" (got ${String(state)})`,
      );
    }
    const answer = await this.backend.finish({
      runId: claim.runId,
      claimToken: claim.claimToken,
      state,
      purgeAt: this.#purgeAt(this.#clock()),
    });
    this.#checkClaimAnswer(answer, claim.runId, `mark it ${state}`);
    if (answer.status === "ok") this.#emit("deleted", claim.runId, state, answer.bytes);
  }

  /**
   * Aborts every live run matching the selector (for example `{ parentRunId }` when the agent run is
   * aborted, `{ sessionId }` when the session is): their snapshots are deleted and a later `wait` gets
   * `aborted`. Returns how many runs were aborted.
   */
  async abort(selector: RunSelector, reason: AbortReason = "run_aborted"): Promise<number> {
    this.#ensureOpen("abort");
    const checked = checkSelector(selector, "abort");
    const dropped = await this.backend.abort(checked, this.#purgeAt(this.#clock()));
    for (const run of dropped) this.#emit("aborted", run.runId, reason, run.bytes);
    return dropped.length;
  }

  /** The session ended: its waiting runs are aborted with reason `session_ended`. */
  async endSession(selector: { sessionId: string } | { sessionKey: string }): Promise<number> {
    return this.abort(selector, "session_ended");
  }

  /** Expires runs past their TTL and forgets old tombstones. The timer calls this; so can the host. */
  async sweep(): Promise<SweepReport> {
    this.#ensureOpen("sweep");
    const now = this.#clock();
    const result = await this.backend.sweep(now, this.#purgeAt(now));
    for (const run of result.expired) this.#emit("expired", run.runId, undefined, run.bytes);
    return { expired: result.expired.length, purged: result.purged };
  }

  async stats(): Promise<StoreStats> {
    this.#ensureOpen("stats");
    return this.backend.stats();
  }

  /**
   * Keeps a small JSON record beside the runs (an agent endpoint's hidden transcript, the client calls a
   * run waits for) in the same backend, so every replica sharing the store reads it. The key is scoped
   * by `owner` (a principal): another owner's get or delete of the same kind and id finds nothing. It
   * lives `ttlSeconds` (default the store's snapshot TTL) and counts against `maxSnapshotBytes`.
   *
   * It also counts against its owner's quota (`maxHostRecordsPerPrincipal`,
   * `maxHostRecordBytesPerPrincipal`) and the store's budget (`maxHostRecordBytes`); room is made by
   * evicting finished records (the owner's own oldest first, then anyone's oldest first), never one put
   * with `inUse: true` (a record a run waits on). A record that cannot fit is refused with
   * `snapshot_limit_exceeded`, naming the owner's own use only, and nothing is evicted.
   */
  async putHostRecord(
    key: HostRecordKey,
    value: JsonValue,
    ttlSeconds?: number,
    options: { inUse?: boolean } = {},
  ): Promise<void> {
    this.#ensureOpen("putHostRecord");
    const where = "putHostRecord";
    const valueJson = toJson(value, `${where}: value`);
    const bytes = utf8Bytes(valueJson);
    if (bytes > this.maxSnapshotBytes) {
      throw new CodeModeError(
        "snapshot_limit_exceeded",
        `${where}: the record is ${bytes} bytes, over the store's cap of ${this.maxSnapshotBytes} (tools.codeMode.maxSnapshotBytes).`,
      );
    }
    const ttl =
      ttlSeconds === undefined
        ? this.snapshotTtlSeconds
        : checkTtlSeconds(ttlSeconds, where, "invalid_input");
    const now = this.#clock();
    const quota: HostRecordQuota = {
      owner: key.owner,
      bytes,
      now,
      evictable: options?.inUse !== true,
      maxRecordsPerOwner: this.maxHostRecordsPerPrincipal,
      maxBytesPerOwner: this.maxHostRecordBytesPerPrincipal,
      maxBytes: this.maxHostRecordBytes,
    };
    const answer = await this.backend.putHostRecord(
      hostRecordKey(key, where),
      valueJson,
      now + ttl * 1000,
      quota,
    );
    if (answer?.status === "full") throw hostRecordRefusal(answer, quota);
  }

  /** The record, or null when there is none for this owner (never written, expired or deleted). */
  async getHostRecord<T = JsonValue>(key: HostRecordKey): Promise<T | null> {
    this.#ensureOpen("getHostRecord");
    const text = await this.backend.getHostRecord(hostRecordKey(key, "getHostRecord"), this.#clock());
    return text === null ? null : fromJson<T>(text);
  }

  /** Deletes the record; true only for the caller that removed it (so get-then-delete takes it once). */
  async deleteHostRecord(key: HostRecordKey): Promise<boolean> {
    this.#ensureOpen("deleteHostRecord");
    return this.backend.deleteHostRecord(hostRecordKey(key, "deleteHostRecord"));
  }

  /**
   * Takes or renews a lease under a host-record key (a conversation being answered, say): true when
   * `holder` holds it now, false while another holder's lease lives. Atomic in every backend, so of
   * two replicas sharing the store one wins; it ends after `ttlSeconds` unless renewed (a process that
   * died holding it does not hold it forever). The lease is a host record of its own: it leaves any
   * record under another key as it is.
   */
  async leaseHostRecord(key: HostRecordKey, holder: string, ttlSeconds: number): Promise<boolean> {
    this.#ensureOpen("leaseHostRecord");
    const where = "leaseHostRecord";
    if (typeof holder !== "string" || holder.length === 0 || holder.length > 200) {
      throw new CodeModeError("invalid_input", `${where}: holder must be a string of 1 to 200 characters`);
    }
    const ttl = checkTtlSeconds(ttlSeconds, where, "invalid_input");
    const now = this.#clock();
    return this.backend.leaseHostRecord(hostRecordKey(key, where), holder, now + ttl * 1000, now);
  }

  /** Ends a lease `holder` holds; true when it did (a lease that expired or passed to another is left). */
  async releaseHostRecord(key: HostRecordKey, holder: string): Promise<boolean> {
    this.#ensureOpen("releaseHostRecord");
    return this.backend.releaseHostRecord(hostRecordKey(key, "releaseHostRecord"), holder);
  }

  /** Stops the sweep timer and closes the backend. A memory backend drops every run (`deleted`, "shutdown"). */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#state = "closed";
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const dropped: DroppedRun[] = await this.backend.close();
    for (const run of dropped) this.#emit("deleted", run.runId, "shutdown", run.bytes);
  }

  #checkClaimAnswer(answer: BackendClaimedAnswer<object>, runId: string, action: string): void {
    if (answer.status !== "lost") return;
    if (answer.state === "aborted") throw abortedRun(runId);
    if (answer.state === "expired") throw expiredRun(runId);
    throw claimLost(runId, answer.state, action, this.claimLeaseMs);
  }

  #purgeAt(now: number): number {
    return now + this.tombstoneSeconds * 1000;
  }

  #ensureOpen(operation: string): void {
    if (this.#state === "open") return;
    throw new CodeModeError(
      "runtime_unavailable",
      this.#state === "new"
        ? `snapshot store: ${operation} before open(); create stores with openSnapshotStore()`
        : `snapshot store: ${operation} after close(); the store is shut down`,
    );
  }

  async #sweepInBackground(): Promise<void> {
    if (this.#sweeping || this.#state !== "open") return;
    this.#sweeping = true;
    try {
      await this.sweep();
    } catch (error) {
      process.emitWarning(
        `snapshot store sweep failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    } finally {
      this.#sweeping = false;
    }
  }

  #emit(event: SnapshotEvent, runId: string, reason?: SnapshotEventReason, bytes?: number): void {
    if (this.#onEvent === undefined) return;
    const payload: SnapshotStoreEvent = { event, runId, at: this.#clock() };
    if (bytes !== undefined) payload.bytes = bytes;
    if (reason !== undefined) payload.reason = reason;
    try {
      this.#onEvent(payload);
    } catch (error) {
      if (this.#listenerWarned) return;
      this.#listenerWarned = true;
      process.emitWarning(
        `snapshot store event listener threw (${error instanceof Error ? error.message : String(error)}); further listener errors are ignored`,
      );
    }
  }
}
