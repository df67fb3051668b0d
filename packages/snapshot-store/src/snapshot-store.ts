import { randomBytes } from "node:crypto";
import type { JsonValue, SnapshotEvent } from "@codecell/contract";
import {
  CODE_MODE_LIMITS,
  CodeModeError,
  type CodeModeOutput,
  type CodeModeTelemetry,
} from "@codecell/contract";
import type { BackendClaimedAnswer, BackendPendingCall, DroppedRun, SnapshotBackend } from "./backend.js";
import { MemorySnapshotBackend } from "./memory-backend.js";
import { looksLikeRunId, newRunId } from "./run-id.js";
import { utf8Bytes } from "./scope.js";
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
  checkPendingCalls,
  checkScope,
  checkSelector,
  checkSnapshot,
  checkTtlSeconds,
  fromJson,
  preview,
  toJson,
} from "./validation.js";

export type SnapshotStoreOptions = {
  /** Where records live. Default: a new in-process memory backend. */
  backend?: SnapshotBackend;
  /** Cap on one record: snapshot plus JSON parts. Default: the config default (10 MiB). */
  maxSnapshotBytes?: number;
  /** Default TTL of a waiting run. Default: the config default (900). */
  snapshotTtlSeconds?: number;
  /** Live (waiting or running) records allowed at once. Default 64. */
  maxLiveRuns?: number;
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

/** Names one host record: what it is (`kind`), whose it is (`owner`, a principal) and which (`id`). */
export type HostRecordKey = { kind: string; owner: string; id: string };

/** One backend key per (kind, owner, id); each part encoded, so no owner can spell another's key. */
function hostRecordKey(key: HostRecordKey, where: string): string {
  const parts = [key?.kind, key?.owner, key?.id];
  for (const [index, part] of parts.entries()) {
    if (typeof part !== "string" || part.length === 0 || part.length > 1024) {
      throw new CodeModeError(
        "invalid_input",
        `${where}: ${["kind", "owner", "id"][index]} must be a string of 1 to 1024 characters`,
      );
    }
  }
  return parts.map((part) => encodeURIComponent(part as string)).join("/");
}
const DEFAULT_CLAIM_LEASE_MS = 120_000;
const DEFAULT_TOMBSTONE_SECONDS = 3_600;
const DEFAULT_SWEEP_INTERVAL_MS = 30_000;

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
  readonly claimLeaseMs: number;
  readonly tombstoneSeconds: number;
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
    this.maxSnapshotBytes = positiveInteger(
      options.maxSnapshotBytes,
      CODE_MODE_LIMITS.maxSnapshotBytes.default,
      "maxSnapshotBytes",
    );
    this.snapshotTtlSeconds =
      options.snapshotTtlSeconds === undefined
        ? CODE_MODE_LIMITS.snapshotTtlSeconds.default
        : checkTtlSeconds(
            options.snapshotTtlSeconds,
            "snapshot store option snapshotTtlSeconds",
            "invalid_config",
          );
    this.maxLiveRuns = positiveInteger(options.maxLiveRuns, DEFAULT_MAX_LIVE_RUNS, "maxLiveRuns");
    this.claimLeaseMs = positiveInteger(options.claimLeaseMs, DEFAULT_CLAIM_LEASE_MS, "claimLeaseMs");
    this.tombstoneSeconds = positiveInteger(
      options.tombstoneSeconds,
      DEFAULT_TOMBSTONE_SECONDS,
      "tombstoneSeconds",
    );
    this.#sweepIntervalMs = positiveInteger(
      options.sweepIntervalMs,
      DEFAULT_SWEEP_INTERVAL_MS,
      "sweepIntervalMs",
      true,
    );
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
    const parts = this.#serialize(input, where);
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
      throw this.#tooLarge(parts.bytes, parts.snapshot.byteLength);
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
      this.maxLiveRuns,
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
      throw new CodeModeError(
        "snapshot_limit_exceeded",
        `cannot suspend the run: ${answer.live} suspended runs are already live, the limit is ${answer.cap ?? this.maxLiveRuns}` +
          (answer.cap === undefined
            ? " (maxLiveRuns)"
            : ` (maxLiveRuns ${this.maxLiveRuns} per live replica)`) +
          ". Waiting runs are never evicted; resume, finish or abort some of them, or raise maxLiveRuns.",
        { live: answer.live, maxLiveRuns: this.maxLiveRuns },
      );
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
    const replacement = JSON.stringify({
      ok: false,
      error: {
        name: "CodeModeError",
        code: "snapshot_limit_exceeded",
        message:
          `the result of nested call ${preview(callId)} was ${request.outcomeBytes} bytes, more than the ` +
          `${Math.max(0, this.maxSnapshotBytes - answer.bytes)} bytes left in this suspended run (maxSnapshotBytes ` +
          `${this.maxSnapshotBytes}); ask the tool for less data`,
      },
    } satisfies CallOutcome);
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
        throw new CodeModeError(
          "invalid_input",
          `run "${runId}" is already being resumed by another wait call; only one wait can resume a run at a time. ` +
            "Use the result of that call.",
        );
      case "finished":
        this.#emit("refused", runId, "finished");
        throw new CodeModeError(
          "invalid_input",
          `run "${runId}" already ${answer.state}; its result was returned by the call that finished it, and it cannot be resumed again.`,
        );
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
    const parts = this.#serialize(payload, where);
    if (parts.bytes > this.maxSnapshotBytes) {
      this.#emit("refused", claim.runId, "too_large", parts.bytes);
      throw this.#tooLarge(parts.bytes, parts.snapshot.byteLength);
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
      throw this.#tooLarge(answer.bytes, parts.snapshot.byteLength);
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
   */
  async putHostRecord(key: HostRecordKey, value: JsonValue, ttlSeconds?: number): Promise<void> {
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
    await this.backend.putHostRecord(hostRecordKey(key, where), valueJson, this.#clock() + ttl * 1000);
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

  /** Stops the sweep timer and closes the backend. A memory backend drops every run (`deleted`, "shutdown"). */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#state = "closed";
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const dropped: DroppedRun[] = await this.backend.close();
    for (const run of dropped) this.#emit("deleted", run.runId, "shutdown", run.bytes);
  }

  #serialize(payload: SuspendPayload | undefined, where: string) {
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
        ? this.snapshotTtlSeconds
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
        settledAt: outcomeJson === null ? null : (call.settledAt ?? new Date(this.#clock()).toISOString()),
      };
    });
    return { snapshot, pendingCalls, outputJson, telemetryJson, hostStateJson, ttlSeconds, bytes };
  }

  #checkClaimAnswer(answer: BackendClaimedAnswer<object>, runId: string, action: string): void {
    if (answer.status !== "lost") return;
    if (answer.state === "aborted") throw abortedRun(runId);
    if (answer.state === "expired") throw expiredRun(runId);
    throw new CodeModeError(
      "internal_error",
      `cannot ${action}: this claim on run "${runId}" is no longer valid (the run is ${answer.state}). ` +
        `A claim lasts claimLeaseMs (${this.claimLeaseMs} ms) and each claim may be used once; claim the run again.`,
    );
  }

  #tooLarge(bytes: number, snapshotBytes: number): CodeModeError {
    return new CodeModeError(
      "snapshot_limit_exceeded",
      `the suspended run needs ${bytes} bytes (snapshot ${snapshotBytes}, state and results ${bytes - snapshotBytes}), ` +
        `over maxSnapshotBytes ${this.maxSnapshotBytes}. Keep less data alive across awaits, or raise maxSnapshotBytes.`,
      { bytes, snapshotBytes, maxSnapshotBytes: this.maxSnapshotBytes },
    );
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

function callBytes(call: { callId: string; toolId: string; startedAt: string }): number {
  return utf8Bytes(call.callId) + utf8Bytes(call.toolId) + utf8Bytes(call.startedAt);
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

/**
 * What a restart leaves for a call that was in flight: a failure, since its process is gone. A call of
 * a client tool (`client:...`) was handed out to the client, which answers it whatever happened to this
 * process, so it is left pending (null) for the client's result.
 */
function interruptedOutcomeJson(call: BackendPendingCall): string | null {
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

function replicaGoneOutcome(callId: string, toolId: string): CallOutcome {
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

function unknownRun(runId: string): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `unknown runId "${runId}": no suspended run with this id is waiting for this caller. ` +
      'Pass the runId of the latest "waiting" result that exec or wait returned in this session.',
  );
}

function expiredRun(runId: string): CodeModeError {
  return new CodeModeError(
    "snapshot_expired",
    `run "${runId}" expired: it waited longer than its snapshot TTL (snapshotTtlSeconds) and its snapshot was deleted. ` +
      "Run the work again with exec.",
  );
}

function abortedRun(runId: string): CodeModeError {
  return new CodeModeError(
    "aborted",
    `run "${runId}" was aborted (its agent run or session was aborted or ended) and its snapshot was deleted. ` +
      "Start the work again with exec if it is still needed.",
  );
}
