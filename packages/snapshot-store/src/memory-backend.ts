import type {
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
  ReplaceRequest,
  SettleRequest,
  SnapshotBackend,
} from "./backend.js";
import { planHostPut, type QuotaEntry } from "./host-record-quota.js";
import { callerMatches, claimDecision, principalOf, selectorMatches } from "./scope.js";
import type { RecoveryReport, RunSelector, RunState, StoreStats } from "./types.js";

type Entry = {
  state: RunState;
  /** For live entries the record; for tombstones only runId and scope are meaningful. */
  record: BackendRecord;
  claimToken: string | null;
  leaseUntil: number;
  /** Tombstones are removed for good after this time. */
  purgeAt: number;
};

const EMPTY = new Uint8Array(0);

function isLive(state: RunState): boolean {
  return state === "waiting" || state === "running";
}

/** A copy that shares no memory with the source (a Buffer's own `slice` would share it). */
function copyBytes(bytes: Uint8Array): Uint8Array {
  // Unzeroed memory is safe here because every byte is overwritten at once.
  const copy = Buffer.allocUnsafeSlow(bytes.byteLength);
  copy.set(bytes);
  return new Uint8Array(copy.buffer, copy.byteOffset, copy.byteLength);
}

type HostEntry = {
  valueJson: string;
  expiresAt: number;
  owner?: string;
  bytes?: number;
  evictable?: boolean;
  seq?: number;
};

function copyCalls(calls: BackendPendingCall[]): BackendPendingCall[] {
  return calls.map((call) => ({ ...call }));
}

/**
 * Records in a Map inside this process: the default backend. Nothing survives the process, and `close`
 * drops every record. Each method runs to completion without awaiting, so each is atomic.
 */
export class MemorySnapshotBackend implements SnapshotBackend {
  readonly kind = "memory";
  readonly durable = false;
  readonly #entries = new Map<string, Entry>();
  /** Host records and leases; `owner` only on records put under a quota (leases count for nothing). */
  readonly #hostRecords = new Map<string, HostEntry>();
  /** Order of writes: the oldest record is evicted first. */
  #hostSeq = 0;
  #live = 0;
  #liveBytes = 0;
  /** Live records per principal (`principalOf`); a principal with none has no entry. */
  readonly #livePerPrincipal = new Map<string, number>();

  async recover(): Promise<RecoveryReport> {
    return { liveRuns: this.#live, requeuedRuns: 0, interruptedCalls: 0 };
  }

  async insert(record: BackendRecord, caps: LiveRunCaps): Promise<BackendInsertAnswer> {
    if (this.#entries.has(record.runId)) return { status: "taken" };
    const principal = principalOf(record.scope);
    const own = this.#livePerPrincipal.get(principal) ?? 0;
    if (this.#live >= caps.maxLiveRuns) return { status: "full", limit: "store", own };
    if (own >= caps.maxLiveRunsPerPrincipal) return { status: "full", limit: "principal", own };
    this.#entries.set(record.runId, {
      state: "waiting",
      record: {
        ...record,
        snapshot: copyBytes(record.snapshot),
        pendingCalls: copyCalls(record.pendingCalls),
      },
      claimToken: null,
      leaseUntil: 0,
      purgeAt: 0,
    });
    this.#live += 1;
    this.#liveBytes += record.bytes;
    this.#livePerPrincipal.set(principal, own + 1);
    return { status: "ok" };
  }

  async settle(request: SettleRequest): Promise<BackendSettleAnswer> {
    const entry = this.#entries.get(request.runId);
    if (entry === undefined || !isLive(entry.state)) return { status: "run_gone" };
    const call = entry.record.pendingCalls.find((candidate) => candidate.callId === request.callId);
    if (call === undefined) return { status: "unknown_call" };
    if (call.outcomeJson !== null) return { status: "already_settled" };
    if (entry.record.bytes + request.outcomeBytes > request.maxBytes) {
      return { status: "too_large", bytes: entry.record.bytes };
    }
    call.outcomeJson = request.outcomeJson;
    call.settledAt = request.settledAt;
    entry.record.bytes += request.outcomeBytes;
    this.#liveBytes += request.outcomeBytes;
    return { status: "recorded" };
  }

  async claim(request: ClaimRequest): Promise<BackendClaimAnswer> {
    const entry = this.#entries.get(request.runId);
    if (entry === undefined) return { status: "unknown" };
    if (!callerMatches(entry.record.scope, request.caller)) return { status: "scope_mismatch" };
    const decision = claimDecision(entry.state, entry.leaseUntil, entry.record.expiresAt, request.now);
    if (decision === "expire") {
      const bytes = entry.record.bytes;
      this.#toTombstone(entry, "expired", request.purgeAt);
      return { status: "expired", bytes, justExpired: true };
    }
    if (decision !== null) return decision;
    entry.state = "running";
    entry.claimToken = request.claimToken;
    entry.leaseUntil = request.leaseUntil;
    entry.record.resumeCount += 1;
    const record = entry.record;
    return {
      status: "claimed",
      record: {
        ...record,
        snapshot: copyBytes(record.snapshot),
        pendingCalls: copyCalls(record.pendingCalls),
      },
    };
  }

  async replace(request: ReplaceRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    const entry = this.#claimed(request.runId, request.claimToken);
    if ("status" in entry) return entry;
    const previous = new Map(entry.record.pendingCalls.map((call) => [call.callId, call]));
    const calls = copyCalls(request.pendingCalls);
    let bytes = request.baseBytes;
    for (const call of calls) {
      const old = previous.get(call.callId);
      if (call.outcomeJson === null && old !== undefined && old.outcomeJson !== null) {
        call.outcomeJson = old.outcomeJson;
        call.settledAt = old.settledAt;
        bytes += Buffer.byteLength(old.outcomeJson, "utf8");
      }
    }
    if (bytes > request.maxBytes) return { status: "too_large", bytes };
    this.#liveBytes += bytes - entry.record.bytes;
    entry.record = {
      ...entry.record,
      snapshot: copyBytes(request.snapshot),
      pendingCalls: calls,
      outputJson: request.outputJson,
      telemetryJson: request.telemetryJson,
      hostStateJson: request.hostStateJson,
      updatedAt: request.updatedAt,
      expiresAt: request.expiresAt,
      bytes,
    };
    entry.state = "waiting";
    entry.claimToken = null;
    return { status: "ok", bytes };
  }

  async release(runId: string, claimToken: string): Promise<BackendClaimedAnswer<object>> {
    const entry = this.#claimed(runId, claimToken);
    if ("status" in entry) return entry;
    entry.state = "waiting";
    entry.claimToken = null;
    return { status: "ok" };
  }

  async finish(request: FinishRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    const entry = this.#claimed(request.runId, request.claimToken);
    if ("status" in entry) return entry;
    const bytes = entry.record.bytes;
    this.#toTombstone(entry, request.state, request.purgeAt);
    return { status: "ok", bytes };
  }

  async abort(selector: RunSelector, purgeAt: number): Promise<DroppedRun[]> {
    const dropped: DroppedRun[] = [];
    for (const entry of this.#entries.values()) {
      if (!isLive(entry.state) || !selectorMatches(selector, entry.record.runId, entry.record.scope))
        continue;
      dropped.push({ runId: entry.record.runId, bytes: entry.record.bytes });
      this.#toTombstone(entry, "aborted", purgeAt);
    }
    return dropped;
  }

  async sweep(now: number, purgeAt: number) {
    const expired: DroppedRun[] = [];
    let purged = 0;
    for (const [runId, entry] of this.#entries) {
      if (isLive(entry.state)) {
        const claimHeld = entry.state === "running" && entry.leaseUntil > now;
        if (entry.record.expiresAt <= now && !claimHeld) {
          expired.push({ runId, bytes: entry.record.bytes });
          this.#toTombstone(entry, "expired", purgeAt);
        }
      } else if (entry.purgeAt <= now) {
        this.#entries.delete(runId);
        purged += 1;
      }
    }
    for (const [key, record] of this.#hostRecords) {
      if (record.expiresAt <= now) this.#hostRecords.delete(key);
    }
    return { expired, purged };
  }

  async stats(): Promise<StoreStats> {
    let running = 0;
    for (const entry of this.#entries.values()) if (entry.state === "running") running += 1;
    return {
      live: this.#live,
      waiting: this.#live - running,
      running,
      tombstones: this.#entries.size - this.#live,
      liveBytes: this.#liveBytes,
    };
  }

  async putHostRecord(
    key: string,
    valueJson: string,
    expiresAt: number,
    quota?: HostRecordQuota,
  ): Promise<HostPutAnswer | undefined> {
    if (quota === undefined) {
      this.#hostRecords.set(key, { valueJson, expiresAt });
      return undefined;
    }
    const usage = { ownCount: 0, ownBytes: 0, totalBytes: 0 };
    const own: Array<QuotaEntry & { seq: number }> = [];
    const all: Array<QuotaEntry & { seq: number }> = [];
    for (const [other, entry] of this.#hostRecords) {
      if (entry.expiresAt <= quota.now) {
        this.#hostRecords.delete(other);
        continue;
      }
      if (entry.owner === undefined || other === key) continue;
      const item = { key: other, bytes: entry.bytes ?? 0, seq: entry.seq ?? 0 };
      usage.totalBytes += item.bytes;
      if (entry.owner === quota.owner) {
        usage.ownCount += 1;
        usage.ownBytes += item.bytes;
        if (entry.evictable) own.push(item);
      }
      if (entry.evictable) all.push(item);
    }
    const bySeq = (a: { seq: number }, b: { seq: number }) => a.seq - b.seq;
    const plan = planHostPut(usage, quota, own.sort(bySeq), all.sort(bySeq));
    if ("status" in plan) return plan;
    for (const evicted of plan.evict) this.#hostRecords.delete(evicted);
    this.#hostRecords.set(key, {
      valueJson,
      expiresAt,
      owner: quota.owner,
      bytes: quota.bytes,
      evictable: quota.evictable,
      seq: this.#hostSeq++,
    });
    return { status: "ok", evicted: plan.evict.length };
  }

  async getHostRecord(key: string, now: number): Promise<string | null> {
    const record = this.#hostRecords.get(key);
    if (!record) return null;
    if (record.expiresAt <= now) {
      this.#hostRecords.delete(key);
      return null;
    }
    return record.valueJson;
  }

  async deleteHostRecord(key: string): Promise<boolean> {
    return this.#hostRecords.delete(key);
  }

  async leaseHostRecord(key: string, holder: string, expiresAt: number, now: number): Promise<boolean> {
    const current = this.#hostRecords.get(key);
    if (current && current.expiresAt > now && current.valueJson !== holder) return false;
    this.#hostRecords.set(key, { valueJson: holder, expiresAt });
    return true;
  }

  async releaseHostRecord(key: string, holder: string): Promise<boolean> {
    if (this.#hostRecords.get(key)?.valueJson !== holder) return false;
    return this.#hostRecords.delete(key);
  }

  async close(): Promise<DroppedRun[]> {
    this.#hostRecords.clear();
    const dropped: DroppedRun[] = [];
    for (const entry of this.#entries.values()) {
      if (isLive(entry.state)) dropped.push({ runId: entry.record.runId, bytes: entry.record.bytes });
    }
    this.#entries.clear();
    this.#livePerPrincipal.clear();
    this.#live = 0;
    this.#liveBytes = 0;
    return dropped;
  }

  #claimed(runId: string, claimToken: string): Entry | BackendClaimedAnswer<never> {
    const entry = this.#entries.get(runId);
    if (entry === undefined) return { status: "lost", state: "gone" };
    if (entry.state !== "running" || entry.claimToken !== claimToken)
      return { status: "lost", state: entry.state };
    return entry;
  }

  /** Drops the snapshot and parts, keeping runId and scope so `wait` can say why the run is gone. */
  #toTombstone(entry: Entry, state: RunState, purgeAt: number): void {
    if (isLive(entry.state)) {
      this.#live -= 1;
      this.#liveBytes -= entry.record.bytes;
      const principal = principalOf(entry.record.scope);
      const own = (this.#livePerPrincipal.get(principal) ?? 1) - 1;
      if (own > 0) this.#livePerPrincipal.set(principal, own);
      else this.#livePerPrincipal.delete(principal);
    }
    entry.state = state;
    entry.claimToken = null;
    entry.purgeAt = purgeAt;
    entry.record = {
      ...entry.record,
      snapshot: EMPTY,
      pendingCalls: [],
      outputJson: "",
      telemetryJson: "",
      hostStateJson: null,
      bytes: 0,
    };
  }
}
