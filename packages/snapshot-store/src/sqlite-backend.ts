import { setImmediate } from "node:timers/promises";
import { CodeModeError } from "@codecell/contract";
import type Database from "better-sqlite3";
import type {
  BackendClaimAnswer,
  BackendClaimedAnswer,
  BackendPendingCall,
  BackendRecord,
  BackendSettleAnswer,
  ClaimRequest,
  DroppedRun,
  FinishRequest,
  HostPutAnswer,
  HostRecordQuota,
  LiveRunCaps,
  ReplaceRequest,
  SettleRequest,
  SnapshotBackend,
} from "./backend.js";
import { planHostPut } from "./host-record-quota.js";
import { HostRecordSeal } from "./host-record-seal.js";
import {
  callEntries,
  deriveRecordKey,
  outcomeMac,
  recordMac,
  type SignedRecord,
  sameMac,
} from "./record-mac.js";
import { callerMatches, claimDecision, selectorMatches, utf8Bytes } from "./scope.js";
import { MIN_SNAPSHOT_KEY_BYTES } from "./snapshot-key.js";
import { type CallRow, loadDatabase, migrate, type RunRow, scopeOf } from "./sqlite-schema.js";
import type { RecoveryReport, RunSelector, RunState, StoreStats } from "./types.js";

export type SqliteSnapshotBackendOptions = {
  /** The database file. It is created when missing; its directory must exist. */
  path: string;
  /**
   * "normal" (default) keeps every committed record through a crash or kill of the process; "full"
   * also keeps the last commits through a power loss, at the cost of an fsync per write.
   */
  synchronous?: "normal" | "full";
  /** How long opening waits for another process to let go of the file. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * Signs what a resume trusts besides the snapshot (scope, output, telemetry, host state, pending
   * calls and every recorded outcome) with HMAC-SHA256; at least 32 bytes, typically the snapshot key
   * (`loadSnapshotKey`; a key of its own is derived from it). A run whose row was changed in the file
   * is never restored: its claim fails `snapshot_restore_failed` and the run is ended. Without it,
   * only the snapshot is protected (by the sandbox's own seal).
   */
  secret?: string | Uint8Array;
};

/** What the SQLite backend signs, by kind; changing a format means a new label. */
const RUN_MAC = "codecell-sqlite-run-1";
const OUTCOME_MAC = "codecell-sqlite-outcome-1";

const SWEEP_BATCH = 250;
const MAX_SWEEP_BATCHES = 100_000;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function asPlainBytes(buffer: Buffer): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/**
 * Records in one SQLite file (better-sqlite3, WAL journal). Every method is one transaction, so a
 * crash leaves each record either fully written or not at all, and a restarted process picks up the
 * runs that were waiting. The file is opened with an exclusive lock: one process owns it at a time.
 */
export class SqliteSnapshotBackend implements SnapshotBackend {
  readonly kind = "sqlite";
  readonly durable = true;
  readonly path: string;
  readonly #db: Database.Database;
  readonly #statements;
  /** Null: rows are not signed (no secret given). */
  readonly #key: Buffer | null;
  /** Signs host records and leases with a key of their own; null without a secret. */
  readonly #seal: HostRecordSeal | null;

  constructor(options: SqliteSnapshotBackendOptions) {
    if (typeof options?.path !== "string" || options.path.length === 0) {
      throw new CodeModeError(
        "invalid_config",
        "SQLite snapshot backend: path must be a non-empty file path",
      );
    }
    this.path = options.path;
    const synchronous = options.synchronous ?? "normal";
    if (synchronous !== "normal" && synchronous !== "full") {
      throw new CodeModeError(
        "invalid_config",
        `SQLite snapshot backend: synchronous must be "normal" or "full" (got ${String(synchronous)})`,
      );
    }
    this.#key = options.secret === undefined ? null : recordKey(options.secret);
    this.#seal = this.#key === null ? null : new HostRecordSeal(this.#key);
    const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
    if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
      throw new CodeModeError(
        "invalid_config",
        `SQLite snapshot backend: busyTimeoutMs must be a non-negative integer (got ${String(busyTimeoutMs)})`,
      );
    }
    try {
      this.#db = loadDatabase(options.path, busyTimeoutMs);
      // Exclusive: a second process opening the same file fails at once instead of racing claims.
      this.#db.pragma("locking_mode = EXCLUSIVE");
      this.#db.pragma("journal_mode = WAL");
      this.#db.pragma(`synchronous = ${synchronous.toUpperCase()}`);
      migrate(this.#db);
    } catch (error) {
      throw new CodeModeError(
        "runtime_unavailable",
        `SQLite snapshot store at ${options.path} could not be opened: ${error instanceof Error ? error.message : String(error)}. ` +
          "Check that the directory exists and is writable and that no other process has the store open.",
        { path: options.path },
        { cause: error },
      );
    }
    this.#statements = this.#prepare();
  }

  #prepare() {
    const db = this.#db;
    return {
      putHostRecord: db.prepare(
        "INSERT INTO host_records (key, value_json, expires_at, owner, bytes, seq, evictable) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET value_json = excluded.value_json, expires_at = excluded.expires_at, owner = excluded.owner, bytes = excluded.bytes, seq = excluded.seq, evictable = excluded.evictable",
      ),
      hostUsage: db.prepare<
        [string, string, string],
        { own_count: number; own_bytes: number; total_bytes: number }
      >(
        `SELECT coalesce(sum(owner = ?), 0) AS own_count, coalesce(sum(CASE WHEN owner = ? THEN bytes END), 0) AS own_bytes,
           coalesce(sum(bytes), 0) AS total_bytes FROM host_records WHERE owner IS NOT NULL AND key != ?`,
      ),
      ownEvictable: db.prepare<[string, string], { key: string; bytes: number }>(
        "SELECT key, bytes FROM host_records WHERE owner = ? AND evictable = 1 AND key != ? ORDER BY seq",
      ),
      allEvictable: db.prepare<[string], { key: string; bytes: number }>(
        "SELECT key, bytes FROM host_records WHERE owner IS NOT NULL AND evictable = 1 AND key != ? ORDER BY seq",
      ),
      nextHostSeq: db.prepare<[], { seq: number }>(
        "SELECT coalesce(max(seq), 0) + 1 AS seq FROM host_records",
      ),
      hostValue: db.prepare<[string, number], { value_json: string }>(
        "SELECT value_json FROM host_records WHERE key = ? AND expires_at > ?",
      ),
      getHostRecord: db.prepare<[string, number], { value_json: string }>(
        "SELECT value_json FROM host_records WHERE key = ? AND expires_at > ?",
      ),
      deleteHostRecord: db.prepare("DELETE FROM host_records WHERE key = ?"),
      // One statement: SQLite runs it atomically, so two processes on the file cannot both take a lease.
      leaseHostRecord: db.prepare(
        "INSERT INTO host_records (key, value_json, expires_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value_json = excluded.value_json, expires_at = excluded.expires_at WHERE host_records.expires_at <= ? OR host_records.value_json = excluded.value_json",
      ),
      releaseHostRecord: db.prepare("DELETE FROM host_records WHERE key = ? AND value_json = ?"),
      purgeHostRecords: db.prepare("DELETE FROM host_records WHERE expires_at <= ?"),
      countLive: db.prepare<[], { n: number }>("SELECT count(*) AS n FROM runs WHERE live = 1"),
      countLiveOf: db.prepare<[string, string], { n: number }>(
        "SELECT count(*) AS n FROM runs WHERE live = 1 AND agent_id = ? AND session_key = ?",
      ),
      runExists: db.prepare<[string], { one: number }>("SELECT 1 AS one FROM runs WHERE run_id = ?"),
      insertRun: db.prepare(
        `INSERT INTO runs (run_id, agent_id, session_key, session_id, parent_run_id, tool_call_id, state, live,
           snapshot, output_json, telemetry_json, host_state_json, created_at, updated_at, expires_at, bytes, resume_count, mac)
         VALUES (@runId, @agentId, @sessionKey, @sessionId, @parentRunId, @toolCallId, 'waiting', 1,
           @snapshot, @outputJson, @telemetryJson, @hostStateJson, @createdAt, @updatedAt, @expiresAt, @bytes, @resumeCount, @mac)`,
      ),
      insertCall: db.prepare(
        `INSERT INTO pending_calls (run_id, position, call_id, tool_id, started_at, outcome_json, settled_at, outcome_mac)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      runHead: db.prepare<
        [string],
        Omit<RunRow, "snapshot" | "output_json" | "telemetry_json" | "host_state_json">
      >(
        `SELECT run_id, agent_id, session_key, session_id, parent_run_id, tool_call_id, state, created_at, updated_at,
           expires_at, bytes, resume_count, claim_token, lease_until FROM runs WHERE run_id = ?`,
      ),
      runFull: db.prepare<[string], RunRow>("SELECT * FROM runs WHERE run_id = ?"),
      calls: db.prepare<[string], CallRow>(
        "SELECT call_id, tool_id, started_at, outcome_json, settled_at, outcome_mac FROM pending_calls WHERE run_id = ? ORDER BY position",
      ),
      call: db.prepare<[string, string], CallRow>(
        "SELECT call_id, tool_id, started_at, outcome_json, settled_at, outcome_mac FROM pending_calls WHERE run_id = ? AND call_id = ?",
      ),
      settleCall: db.prepare(
        "UPDATE pending_calls SET outcome_json = ?, settled_at = ?, outcome_mac = ? WHERE run_id = ? AND call_id = ?",
      ),
      addBytes: db.prepare("UPDATE runs SET bytes = bytes + ? WHERE run_id = ?"),
      claim: db.prepare(
        "UPDATE runs SET state = 'running', claim_token = ?, lease_until = ?, resume_count = resume_count + 1 WHERE run_id = ?",
      ),
      replaceRun: db.prepare(
        `UPDATE runs SET state = 'waiting', claim_token = NULL, lease_until = 0, snapshot = @snapshot,
           output_json = @outputJson, telemetry_json = @telemetryJson, host_state_json = @hostStateJson,
           updated_at = @updatedAt, expires_at = @expiresAt, bytes = @bytes, mac = @mac WHERE run_id = @runId`,
      ),
      releaseRun: db.prepare(
        "UPDATE runs SET state = 'waiting', claim_token = NULL, lease_until = 0 WHERE run_id = ?",
      ),
      deleteCalls: db.prepare("DELETE FROM pending_calls WHERE run_id = ?"),
      tombstone: db.prepare(
        `UPDATE runs SET state = ?, live = 0, purge_at = ?, snapshot = NULL, output_json = NULL, telemetry_json = NULL,
           host_state_json = NULL, bytes = 0, claim_token = NULL, lease_until = 0, mac = NULL WHERE run_id = ?`,
      ),
      liveScopes: db.prepare<[], RunRow>(
        `SELECT run_id, agent_id, session_key, session_id, parent_run_id, tool_call_id, bytes FROM runs WHERE live = 1`,
      ),
      dueToExpire: db.prepare<[number, number, number], { run_id: string; bytes: number }>(
        `SELECT run_id, bytes FROM runs WHERE live = 1 AND expires_at <= ? AND (state = 'waiting' OR lease_until <= ?)
         LIMIT ?`,
      ),
      purgeSome: db.prepare(
        "DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE live = 0 AND purge_at <= ? LIMIT ?)",
      ),
      stats: db.prepare<[], { live: number; running: number; tombstones: number; live_bytes: number | null }>(
        `SELECT coalesce(sum(live), 0) AS live, coalesce(sum(state = 'running'), 0) AS running,
           coalesce(sum(live = 0), 0) AS tombstones, coalesce(sum(CASE WHEN live = 1 THEN bytes END), 0) AS live_bytes
         FROM runs`,
      ),
      requeue: db.prepare(
        "UPDATE runs SET state = 'waiting', claim_token = NULL, lease_until = 0 WHERE state = 'running'",
      ),
      unsettled: db.prepare<[], { run_id: string } & CallRow>(
        `SELECT c.run_id, c.call_id, c.tool_id, c.started_at, c.outcome_json, c.settled_at, c.outcome_mac FROM pending_calls c
           JOIN runs r ON r.run_id = c.run_id WHERE r.live = 1 AND c.outcome_json IS NULL`,
      ),
    };
  }

  async recover(
    now: number,
    interruptedOutcome: (call: BackendPendingCall) => string | null,
  ): Promise<RecoveryReport> {
    const statements = this.#statements;
    return this.#db.transaction(() => {
      const liveRuns = statements.countLive.get()!.n;
      const requeuedRuns = statements.requeue.run().changes;
      const settledAt = new Date(now).toISOString();
      const unsettled = statements.unsettled.all();
      let interrupted = 0;
      for (const row of unsettled) {
        const outcomeJson = interruptedOutcome({
          callId: row.call_id,
          toolId: row.tool_id,
          startedAt: row.started_at,
          outcomeJson: null,
          settledAt: null,
        });
        if (outcomeJson === null) continue;
        interrupted++;
        statements.settleCall.run(
          outcomeJson,
          settledAt,
          this.#outcomeMac(row.run_id, row.call_id, outcomeJson, settledAt),
          row.run_id,
          row.call_id,
        );
        statements.addBytes.run(utf8Bytes(outcomeJson), row.run_id);
      }
      return { liveRuns, requeuedRuns, interruptedCalls: interrupted };
    })();
  }

  async insert(record: BackendRecord, caps: LiveRunCaps) {
    const statements = this.#statements;
    return this.#db.transaction(() => {
      if (statements.runExists.get(record.runId)) return { status: "taken" as const };
      const own = statements.countLiveOf.get(record.scope.agentId, record.scope.sessionKey)!.n;
      if (statements.countLive.get()!.n >= caps.maxLiveRuns)
        return { status: "full" as const, limit: "store" as const, own };
      if (own >= caps.maxLiveRunsPerPrincipal)
        return { status: "full" as const, limit: "principal" as const, own };
      statements.insertRun.run({
        runId: record.runId,
        ...record.scope,
        snapshot: asBuffer(record.snapshot),
        outputJson: record.outputJson,
        telemetryJson: record.telemetryJson,
        hostStateJson: record.hostStateJson,
        createdAt: record.createdAt,
        updatedAt: record.updatedAt,
        expiresAt: record.expiresAt,
        bytes: record.bytes,
        resumeCount: record.resumeCount,
        mac: this.#recordMac(record),
      });
      this.#insertCalls(record.runId, record.pendingCalls);
      return { status: "ok" as const };
    })();
  }

  /** Carried: outcomes kept from the previous version of the row, with the MAC they were stored with
   * (signing them again would launder an outcome changed in the file meanwhile). */
  #insertCalls(runId: string, calls: BackendPendingCall[], carried = new Map<string, Buffer | null>()): void {
    calls.forEach((call, position) => {
      this.#statements.insertCall.run(
        runId,
        position,
        call.callId,
        call.toolId,
        call.startedAt,
        call.outcomeJson,
        call.settledAt,
        call.outcomeJson === null
          ? null
          : carried.has(call.callId)
            ? (carried.get(call.callId) ?? null)
            : this.#outcomeMac(runId, call.callId, call.outcomeJson, call.settledAt ?? ""),
      );
    });
  }

  #recordMac(record: SignedRecord & { pendingCalls: BackendPendingCall[] }): Buffer | null {
    if (this.#key === null) return null;
    return recordMac(this.#key, RUN_MAC, record, callEntries(record.pendingCalls));
  }

  #outcomeMac(runId: string, callId: string, outcomeJson: string, settledAt: string): Buffer | null {
    if (this.#key === null) return null;
    return outcomeMac(this.#key, OUTCOME_MAC, runId, callId, outcomeJson, settledAt);
  }

  /** Whether a claimed record is the one this store signed (always, without a secret). */
  #intact(row: RunRow, record: BackendRecord, calls: CallRow[]): boolean {
    if (this.#key === null) return true;
    let intact = sameMac(this.#recordMac(record) as Buffer, row.mac);
    for (const call of calls) {
      if (call.outcome_json === null) continue;
      const expected = this.#outcomeMac(row.run_id, call.call_id, call.outcome_json, call.settled_at ?? "");
      if (!sameMac(expected as Buffer, call.outcome_mac)) intact = false;
    }
    return intact;
  }

  async settle(request: SettleRequest): Promise<BackendSettleAnswer> {
    const statements = this.#statements;
    return this.#db.transaction((): BackendSettleAnswer => {
      const head = statements.runHead.get(request.runId);
      if (head === undefined || (head.state !== "waiting" && head.state !== "running"))
        return { status: "run_gone" };
      const call = statements.call.get(request.runId, request.callId);
      if (call === undefined) return { status: "unknown_call" };
      if (call.outcome_json !== null) return { status: "already_settled" };
      if (head.bytes + request.outcomeBytes > request.maxBytes)
        return { status: "too_large", bytes: head.bytes };
      statements.settleCall.run(
        request.outcomeJson,
        request.settledAt,
        this.#outcomeMac(request.runId, request.callId, request.outcomeJson, request.settledAt),
        request.runId,
        request.callId,
      );
      statements.addBytes.run(request.outcomeBytes, request.runId);
      return { status: "recorded" };
    })();
  }

  async claim(request: ClaimRequest): Promise<BackendClaimAnswer> {
    const statements = this.#statements;
    const answer = this.#db.transaction((): BackendClaimAnswer | { status: "forged" } => {
      const head = statements.runHead.get(request.runId);
      if (head === undefined) return { status: "unknown" };
      if (!callerMatches(scopeOf(head as RunRow), request.caller)) return { status: "scope_mismatch" };
      const decision = claimDecision(head.state, head.lease_until, head.expires_at, request.now);
      if (decision === "expire") {
        this.#tombstone(request.runId, "expired", request.purgeAt);
        return { status: "expired", bytes: head.bytes, justExpired: true };
      }
      if (decision !== null) return decision;
      statements.claim.run(request.claimToken, request.leaseUntil, request.runId);
      const row = statements.runFull.get(request.runId)!;
      const calls = statements.calls.all(row.run_id);
      const record = this.#recordOf(row, calls);
      if (!this.#intact(row, record, calls)) {
        // Never restore a record this store did not write; end it so it cannot be tried again.
        this.#tombstone(request.runId, "failed", request.purgeAt);
        return { status: "forged" as const };
      }
      return { status: "claimed", record };
    })();
    if (answer.status === "forged") {
      throw new CodeModeError(
        "snapshot_restore_failed",
        `run "${request.runId}" was not restored: its record in the SQLite snapshot store failed the integrity check (it was ` +
          "changed outside codecell, or written with a different secret or key file). Run the work again with exec; " +
          "the operator should check who can write the store file.",
      );
    }
    return answer;
  }

  #recordOf(row: RunRow, calls: CallRow[]): BackendRecord {
    return {
      runId: row.run_id,
      scope: scopeOf(row),
      snapshot: asPlainBytes(row.snapshot!),
      pendingCalls: calls.map((call) => ({
        callId: call.call_id,
        toolId: call.tool_id,
        startedAt: call.started_at,
        outcomeJson: call.outcome_json,
        settledAt: call.settled_at,
      })),
      outputJson: row.output_json!,
      telemetryJson: row.telemetry_json!,
      hostStateJson: row.host_state_json,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      expiresAt: row.expires_at,
      bytes: row.bytes,
      resumeCount: row.resume_count,
    };
  }

  /** The run under a valid claim, or why not. Runs inside the caller's transaction. */
  #claimed(runId: string, claimToken: string) {
    const head = this.#statements.runHead.get(runId);
    if (head === undefined) return { status: "lost" as const, state: "gone" as const };
    if (head.state !== "running" || head.claim_token !== claimToken)
      return { status: "lost" as const, state: head.state };
    return head;
  }

  async replace(request: ReplaceRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    const statements = this.#statements;
    return this.#db.transaction((): BackendClaimedAnswer<{ bytes: number }> => {
      const head = this.#claimed(request.runId, request.claimToken);
      if ("status" in head) return head;
      const previous = new Map(statements.calls.all(request.runId).map((call) => [call.call_id, call]));
      let bytes = request.baseBytes;
      const carried = new Map<string, Buffer | null>();
      const calls = request.pendingCalls.map((call) => {
        const old = previous.get(call.callId);
        if (call.outcomeJson !== null || old === undefined || old.outcome_json === null) return call;
        bytes += utf8Bytes(old.outcome_json);
        carried.set(call.callId, old.outcome_mac);
        return { ...call, outcomeJson: old.outcome_json, settledAt: old.settled_at };
      });
      if (bytes > request.maxBytes) return { status: "too_large", bytes };
      statements.replaceRun.run({
        runId: request.runId,
        snapshot: asBuffer(request.snapshot),
        outputJson: request.outputJson,
        telemetryJson: request.telemetryJson,
        hostStateJson: request.hostStateJson,
        updatedAt: request.updatedAt,
        expiresAt: request.expiresAt,
        bytes,
        mac: this.#recordMac({ ...request, scope: scopeOf(head as RunRow), pendingCalls: calls }),
      });
      statements.deleteCalls.run(request.runId);
      this.#insertCalls(request.runId, calls, carried);
      return { status: "ok", bytes };
    })();
  }

  async release(runId: string, claimToken: string): Promise<BackendClaimedAnswer<object>> {
    return this.#db.transaction((): BackendClaimedAnswer<object> => {
      const head = this.#claimed(runId, claimToken);
      if ("status" in head) return head;
      this.#statements.releaseRun.run(runId);
      return { status: "ok" };
    })();
  }

  async finish(request: FinishRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    return this.#db.transaction((): BackendClaimedAnswer<{ bytes: number }> => {
      const head = this.#claimed(request.runId, request.claimToken);
      if ("status" in head) return head;
      this.#tombstone(request.runId, request.state, request.purgeAt);
      return { status: "ok", bytes: head.bytes };
    })();
  }

  #tombstone(runId: string, state: RunState, purgeAt: number): void {
    this.#statements.deleteCalls.run(runId);
    this.#statements.tombstone.run(state, purgeAt, runId);
  }

  async abort(selector: RunSelector, purgeAt: number): Promise<DroppedRun[]> {
    return this.#db.transaction(() => {
      const dropped: DroppedRun[] = [];
      // Live runs are capped (maxLiveRuns), so scanning them beats an index per selector field.
      for (const row of this.#statements.liveScopes.all()) {
        if (!selectorMatches(selector, row.run_id, scopeOf(row))) continue;
        dropped.push({ runId: row.run_id, bytes: row.bytes });
        this.#tombstone(row.run_id, "aborted", purgeAt);
      }
      return dropped;
    })();
  }

  /**
   * Works in batches of SWEEP_BATCH rows, one transaction each, yielding to the event loop in between:
   * better-sqlite3 is synchronous, and a sweep of thousands of rows in one go would stall the host.
   */
  async sweep(now: number, purgeAt: number) {
    const statements = this.#statements;
    const expired: DroppedRun[] = [];
    let purged = 0;
    const expireBatch = this.#db.transaction(() => {
      const due = statements.dueToExpire.all(now, now, SWEEP_BATCH);
      for (const row of due) {
        this.#tombstone(row.run_id, "expired", purgeAt);
        expired.push({ runId: row.run_id, bytes: row.bytes });
      }
      return due.length;
    });
    // Bounded: each full batch removes SWEEP_BATCH rows from the candidates.
    for (let batch = 0; batch < MAX_SWEEP_BATCHES && this.#db.open; batch += 1) {
      if (expireBatch() < SWEEP_BATCH) break;
      await setImmediate();
    }
    for (let batch = 0; batch < MAX_SWEEP_BATCHES && this.#db.open; batch += 1) {
      const removed = statements.purgeSome.run(now, SWEEP_BATCH).changes;
      purged += removed;
      if (removed < SWEEP_BATCH) break;
      await setImmediate();
    }
    if (this.#db.open) statements.purgeHostRecords.run(now);
    return { expired, purged };
  }

  async stats(): Promise<StoreStats> {
    const row = this.#statements.stats.get()!;
    return {
      live: row.live,
      waiting: row.live - row.running,
      running: row.running,
      tombstones: row.tombstones,
      liveBytes: row.live_bytes ?? 0,
    };
  }

  async putHostRecord(
    key: string,
    valueJson: string,
    expiresAt: number,
    quota?: HostRecordQuota,
  ): Promise<HostPutAnswer | undefined> {
    const statements = this.#statements;
    const stored = this.#seal ? this.#seal.seal("value", key, valueJson) : valueJson;
    // One transaction: the quota is checked, room made and the record written at once.
    return this.#db.transaction((): HostPutAnswer | undefined => {
      const seq = statements.nextHostSeq.get()!.seq;
      if (quota === undefined) {
        statements.putHostRecord.run(key, stored, expiresAt, null, 0, seq, 1);
        return undefined;
      }
      statements.purgeHostRecords.run(quota.now);
      const usage = statements.hostUsage.get(quota.owner, quota.owner, key)!;
      // Planned from the rows first, then deleted: a statement being iterated cannot be written under.
      const plan = planHostPut(
        { ownCount: usage.own_count, ownBytes: usage.own_bytes, totalBytes: usage.total_bytes },
        quota,
        // Started only when walked: an open iteration keeps the connection busy.
        { [Symbol.iterator]: () => statements.ownEvictable.iterate(quota.owner, key) },
        { [Symbol.iterator]: () => statements.allEvictable.iterate(key) },
      );
      if ("status" in plan) return plan;
      for (const evicted of plan.evict) statements.deleteHostRecord.run(evicted);
      statements.putHostRecord.run(
        key,
        stored,
        expiresAt,
        quota.owner,
        quota.bytes,
        seq,
        quota.evictable ? 1 : 0,
      );
      return { status: "ok", evicted: plan.evict.length };
    })();
  }

  async getHostRecord(key: string, now: number): Promise<string | null> {
    const stored = this.#statements.getHostRecord.get(key, now)?.value_json;
    if (stored === undefined) return null;
    return this.#seal ? this.#seal.open("value", key, stored) : stored;
  }

  async deleteHostRecord(key: string): Promise<boolean> {
    return this.#statements.deleteHostRecord.run(key).changes > 0;
  }

  async leaseHostRecord(key: string, holder: string, expiresAt: number, now: number): Promise<boolean> {
    const seal = this.#seal;
    // Sealing a holder gives the same text every time, so the statement compares sealed values.
    const sealed = seal ? seal.seal("lease", key, holder) : holder;
    if (this.#statements.leaseHostRecord.run(key, sealed, expiresAt, now).changes > 0) return true;
    // Another holder's live lease, unless it fails its check: then it is refused, not obeyed.
    const current = this.#statements.hostValue.get(key, now)?.value_json;
    if (seal && current !== undefined) seal.open("lease", key, current);
    return false;
  }

  async releaseHostRecord(key: string, holder: string): Promise<boolean> {
    const sealed = this.#seal ? this.#seal.seal("lease", key, holder) : holder;
    return this.#statements.releaseHostRecord.run(key, sealed).changes > 0;
  }

  async close(): Promise<DroppedRun[]> {
    if (this.#db.open) {
      // Fold the WAL back into the main file so the store is one file at rest.
      this.#db.pragma("wal_checkpoint(TRUNCATE)");
      this.#db.close();
    }
    return [];
  }
}

function recordKey(secret: string | Uint8Array): Buffer {
  const bytes =
    typeof secret === "string" ? Buffer.from(secret, "utf8") : secret instanceof Uint8Array ? secret : null;
  if (bytes === null || bytes.byteLength < MIN_SNAPSHOT_KEY_BYTES) {
    throw new CodeModeError(
      "invalid_config",
      `SQLite snapshot backend: secret must be at least ${MIN_SNAPSHOT_KEY_BYTES} bytes (the snapshot key from loadSnapshotKey, or e.g. openssl rand -base64 48).`,
    );
  }
  return deriveRecordKey(bytes, "codecell sqlite records 1");
}
