// The Redis snapshot backend: its options and the SnapshotBackend operations, composed of the record codec, lease and outcome watch.
import { randomBytes, randomUUID } from "node:crypto";
import { CodeModeError } from "@codecell/contract";
import type {
  BackendClaimAnswer,
  BackendClaimedAnswer,
  BackendInsertAnswer,
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
import { HostRecordSeal } from "./host-record-seal.js";
import { SCOPE_FIELDS } from "./record-mac.js";
import {
  connectionTarget,
  createScriptClient,
  defineScripts,
  type ScriptClient,
} from "./redis-connection.js";
import { DEFAULT_LEASE_MS, REPLICA_MARK_MS, ReplicaLease } from "./redis-lease.js";
import { OutcomeSubscriptions, watchOutcomes } from "./redis-outcome-watch.js";
import { RedisRecordCodec } from "./redis-record.js";
import type { RecoveryReport, RunSelector, RunState, StoreStats } from "./types.js";

/** One Redis Sentinel to ask where the master is. */
export type RedisSentinelAddress = { host: string; port: number };

export type RedisSnapshotBackendOptions = {
  /**
   * `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS: a standalone server. Every
   * replica of a deployment uses the same server and prefix. Exactly one of `url` and `sentinels`.
   */
  url?: string;
  /**
   * The Sentinels of a Sentinel deployment (any that answer will do): the client asks them for the
   * current master, and again after a failover. Exactly one of `url` and `sentinels`; needs `name`.
   */
  sentinels?: RedisSentinelAddress[];
  /** The master group name the Sentinels monitor (`sentinel monitor <name> ...`). */
  name?: string;
  /** With `sentinels`: the master's and replicas' ACL user and password, database, and TLS. */
  username?: string;
  password?: string;
  db?: number;
  tls?: boolean;
  /** Prefix of every key this store writes. Default "codecell:". */
  keyPrefix?: string;
  /**
   * The integrity key shared by all replicas (at least 32 bytes): every record and every outcome is
   * signed with HMAC-SHA256, and a record that does not verify is never restored.
   */
  secret: string | Uint8Array;
  /**
   * How long this replica's lease lasts without renewal (renewed every third of it, and at once when
   * the connection to Redis comes back). A replica that closes marks its lease closed and its nested
   * calls are settled as interrupted at once. A replica that dies, freezes or loses Redis has its calls
   * settled as interrupted once its lease has been missing for one more lease period (a Redis restart
   * can drop a live replica's lease until its next renewal, and a live call must never be reported
   * interrupted): between two and two and a third lease periods after its last renewal. Default 15000.
   */
  replicaLeaseMs?: number;
  /** How long to wait for a connection or a reply before failing with runtime_unavailable. Default 5000. */
  commandTimeoutMs?: number;
};

const DEFAULT_PREFIX = "codecell:";
const DEFAULT_TOMBSTONE_MS = 3_600_000;
const SWEEP_BATCH = 250;
const MAX_SWEEP_BATCHES = 100_000;

/**
 * Records in Redis, shared by any number of gateway replicas: one hash per run, a sorted set of live
 * runs by expiry and one of tombstones by purge time, and one Lua script per operation (atomic on the
 * server). Redis expiry removes records on its own some time after they could no longer be resumed or
 * explained. Outcomes of nested calls are published as they are recorded, so a `wait` on any replica
 * learns of them at once, and each replica holds a lease its calls depend on.
 */
export class RedisSnapshotBackend implements SnapshotBackend {
  readonly kind = "redis";
  readonly durable = true;
  /** This process's identity in leases and call ownership. */
  readonly replicaId = randomUUID();
  readonly where: string;
  readonly #prefix: string;
  readonly #codec: RedisRecordCodec;
  readonly #leaseMs: number;
  readonly #client: ScriptClient;
  readonly #lease: ReplicaLease;
  readonly #subscriptions: OutcomeSubscriptions;
  #epoch = "";
  /** Signs host records and leases (bound to kind, owner and id) with a key derived from the secret. */
  readonly #seal: HostRecordSeal;
  #closed = false;

  constructor(options: RedisSnapshotBackendOptions) {
    const target = connectionTarget(options);
    this.where = target.where;
    this.#codec = new RedisRecordCodec(options.secret);
    // Checked by the codec above: at least 32 bytes.
    this.#seal = new HostRecordSeal(
      typeof options.secret === "string" ? Buffer.from(options.secret, "utf8") : options.secret,
    );
    this.#prefix = options.keyPrefix ?? DEFAULT_PREFIX;
    if (typeof this.#prefix !== "string" || this.#prefix.length === 0) {
      throw new CodeModeError(
        "invalid_config",
        "Redis snapshot backend: keyPrefix must be a non-empty string",
      );
    }
    this.#leaseMs = options.replicaLeaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isSafeInteger(this.#leaseMs) || this.#leaseMs < 300) {
      throw new CodeModeError(
        "invalid_config",
        `Redis snapshot backend: replicaLeaseMs must be an integer of at least 300 (got ${String(options.replicaLeaseMs)})`,
      );
    }
    const timeout = options.commandTimeoutMs ?? 5_000;
    this.#client = createScriptClient(target, timeout);
    this.#lease = new ReplicaLease(this.#client, this.#prefix, this.replicaId, this.#leaseMs);
    this.#subscriptions = new OutcomeSubscriptions(this.#client);
    // A Redis that restarted (even from a persisted dataset) may have lost this replica's lease: renew it
    // as soon as the connection is back rather than at the next tick, so other replicas do not take our
    // live calls for interrupted ones. A renewal that fails here is made again at the lease's next tick.
    this.#client.on("ready", () => {
      if (this.#lease.started && !this.#closed) void this.#lease.renew().catch(() => {});
    });
    defineScripts(this.#client);
  }

  #key(runId: string): string {
    return `${this.#prefix}run:${runId}`;
  }

  get #live(): string {
    return `${this.#prefix}live`;
  }

  get #tombs(): string {
    return `${this.#prefix}tombs`;
  }

  get #epochKey(): string {
    return `${this.#prefix}epoch`;
  }

  #hostRecordKey(key: string): string {
    return `${this.#prefix}host:${key}`;
  }

  #channel(runId: string): string {
    return `${this.#prefix}outcomes:${runId}`;
  }

  /** Runs one Redis operation; a connection or server failure becomes runtime_unavailable. */
  async #redis<T>(operation: string, action: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      throw new CodeModeError("runtime_unavailable", `Redis snapshot store: ${operation} after close`);
    }
    try {
      return await action();
    } catch (error) {
      if (CodeModeError.is(error)) throw error;
      throw new CodeModeError(
        "runtime_unavailable",
        `the snapshot store (Redis at ${this.where}) is unavailable: ${error instanceof Error ? error.message : String(error)}. ` +
          "Try the call again in a moment; if it keeps failing, the operator must check the Redis server.",
        { operation },
        { cause: error },
      );
    }
  }

  async recover(): Promise<RecoveryReport> {
    return this.#redis("open", async () => {
      await this.#client.connect();
      await this.#lease.renew();
      this.#lease.start();
      await this.#adoptEpoch();
      // Nothing to repair here: a claim by a dead replica runs out with its lease (claimLeaseMs), and
      // its nested calls are settled as interrupted by the next wait once its replica lease is gone.
      const liveRuns = await this.#client.zcard(this.#live);
      return { liveRuns, requeuedRuns: 0, interruptedCalls: 0 };
    });
  }

  /**
   * The epoch key tells "Redis lost its data since we connected" apart from "no such run": it is set
   * once per Redis dataset, and a run missing while the epoch changed was lost, not never there.
   */
  async #adoptEpoch(): Promise<void> {
    await this.#client.set(this.#epochKey, randomBytes(12).toString("base64url"), "NX");
    this.#epoch = (await this.#client.get(this.#epochKey)) ?? "";
  }

  async insert(
    record: BackendRecord,
    caps: LiveRunCaps,
    tombstoneMs = DEFAULT_TOMBSTONE_MS,
  ): Promise<BackendInsertAnswer> {
    return this.#redis("suspend", async () => {
      const fields = this.#codec.insertFields(record, this.replicaId, tombstoneMs);
      const keyTtl = Math.max(1, record.expiresAt - record.createdAt) + tombstoneMs;
      const answer = (await this.#client.ccInsert(
        this.#key(record.runId),
        this.#live,
        caps.maxLiveRuns,
        record.expiresAt,
        keyTtl,
        record.runId,
        this.#prefix,
        this.#leaseMs,
        caps.maxLiveRunsPerPrincipal,
        record.scope.agentId,
        record.scope.sessionKey,
        ...fields,
      )) as [string, string?, number?, number?, number?];
      if (answer[0] === "full") {
        return {
          status: "full",
          limit: answer[1] === "principal" ? "principal" : "store",
          own: Number(answer[2]),
          cap: Number(answer[3]),
          principalCap: Number(answer[4]),
        };
      }
      if (answer[0] === "taken") return { status: "taken" };
      return { status: "ok" };
    });
  }

  async settle(request: SettleRequest): Promise<BackendSettleAnswer> {
    return this.#redis("settleCall", async () => {
      const mac = this.#codec.outcomeMac(
        request.runId,
        request.callId,
        request.outcomeJson,
        request.settledAt,
      );
      const answer = (await this.#client.ccSettle(
        this.#key(request.runId),
        request.callId,
        request.outcomeJson,
        request.outcomeBytes,
        request.settledAt,
        request.maxBytes,
        mac.toString("base64"),
        this.#channel(request.runId),
      )) as [string, number?];
      if (answer[0] === "too_large") return { status: "too_large", bytes: Number(answer[1]) };
      return { status: answer[0] as "recorded" | "already_settled" | "unknown_call" | "run_gone" };
    });
  }

  async claim(request: ClaimRequest): Promise<BackendClaimAnswer> {
    const answer = await this.#redis("claim", () =>
      this.#client.ccClaimBuffer(
        this.#key(request.runId),
        this.#live,
        this.#tombs,
        this.#epochKey,
        request.caller.agentId,
        request.caller.sessionKey,
        request.caller.sessionId,
        request.caller.parentRunId,
        request.now,
        request.claimToken,
        request.leaseUntil,
        request.purgeAt,
        request.runId,
        this.#epoch,
        this.replicaId,
        this.#prefix,
        this.#leaseMs,
        REPLICA_MARK_MS,
      ),
    ).catch((error: unknown) => {
      // A claim that timed out here may still run on the server, and would hold the run until its
      // claim lease ends: give it back as soon as Redis answers (a claim that never ran is not ours).
      this.#releaseAbandoned(request.runId, request.claimToken, 0);
      throw error;
    });
    const status = String(answer[0]);
    switch (status) {
      case "reset":
        // Adopt the server's new epoch, so runs stored from now on are answered normally again, and
        // say when the data was lost, so a wait for another run stored before then is told so too
        // (for as long as tombstones last) instead of hearing "unknown runId". Both are best effort: this
        // claim fails with the reset either way, and the next claim sees the reset again if they did not land.
        await this.#client
          .set(`${this.#epochKey}-lost-at`, String(Date.now()), "PX", DEFAULT_TOMBSTONE_MS, "NX")
          .catch(() => {});
        await this.#adoptEpoch().catch(() => {});
        throw new CodeModeError(
          "snapshot_restore_failed",
          `run "${request.runId}" cannot be resumed: the snapshot store (Redis at ${this.where}) lost its records since this ` +
            "gateway connected (Redis restarted without persistence, or was flushed). Run the work again with exec.",
        );
      case "lost":
        throw new CodeModeError(
          "snapshot_restore_failed",
          `run "${request.runId}" cannot be resumed: it is not in the snapshot store (Redis at ${this.where}), which lost its ` +
            `records at ${new Date(Number(answer[1])).toISOString()} (Redis restarted without persistence, or was flushed); ` +
            "a run stored before then is lost. Run the work again with exec.",
        );
      case "unknown":
      case "scope_mismatch":
      case "busy":
      case "aborted":
        return { status };
      case "expired":
        return { status: "expired", bytes: Number(answer[1]), justExpired: Number(answer[2]) === 1 };
      case "finished":
        return { status: "finished", state: String(answer[1]) as "completed" | "failed" };
      case "claimed":
        return { status: "claimed", record: await this.#verifiedRecord(request, answer[1] as Buffer[]) };
      default:
        throw new CodeModeError("internal_error", `Redis snapshot store: unexpected claim answer ${status}`);
    }
  }

  #releaseAbandoned(runId: string, claimToken: string, attempt: number): void {
    if (this.#closed || attempt >= 20) return;
    const timer = setTimeout(() => {
      this.release(runId, claimToken).catch(() => this.#releaseAbandoned(runId, claimToken, attempt + 1));
    }, 500);
    timer.unref();
  }

  async #verifiedRecord(request: ClaimRequest, flat: Buffer[]): Promise<BackendRecord> {
    const { record, intact } = this.#codec.decode(request.runId, flat);
    if (!intact) {
      // Never restore a record this deployment did not write; end it so it cannot be tried again. If
      // ending it fails, the integrity error below is still what the caller must hear, and the record
      // fails the check again at the next claim.
      await this.finish({
        runId: request.runId,
        claimToken: request.claimToken,
        state: "failed",
        purgeAt: request.purgeAt,
      }).catch(() => {});
      throw new CodeModeError(
        "snapshot_restore_failed",
        `run "${request.runId}" was not restored: its record in the snapshot store failed the integrity check (it was ` +
          "changed outside codecell, or written by a replica with a different secret). Run the work again with exec; " +
          "the operator should check that every replica has the same snapshotStore.secret.",
      );
    }
    return record;
  }

  async replace(request: ReplaceRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    return this.#redis("resuspend", async () => {
      const head = await this.#client.hmget(this.#key(request.runId), ...RedisRecordCodec.scopeFieldNames());
      const scope = RedisRecordCodec.scopeOf(head);
      const { callArgs, parts } = this.#codec.replaceArgs(request, scope);
      const retention = Number(
        (await this.#client.hget(this.#key(request.runId), "ret")) ?? DEFAULT_TOMBSTONE_MS,
      );
      const keyTtl = Math.max(1, request.expiresAt - request.updatedAt) + retention;
      const answer = (await this.#client.ccReplace(
        this.#key(request.runId),
        this.#live,
        request.claimToken,
        request.runId,
        request.expiresAt,
        keyTtl,
        request.baseBytes,
        request.maxBytes,
        this.replicaId,
        request.hostStateJson === null ? "0" : "1",
        request.pendingCalls.length,
        ...callArgs,
        ...parts,
      )) as [string, string | number];
      if (answer[0] === "lost") return { status: "lost", state: answer[1] as RunState | "gone" };
      if (answer[0] === "too_large") return { status: "too_large", bytes: Number(answer[1]) };
      return { status: "ok", bytes: Number(answer[1]) };
    });
  }

  async release(runId: string, claimToken: string): Promise<BackendClaimedAnswer<object>> {
    return this.#redis("release", async () => {
      const answer = (await this.#client.ccRelease(this.#key(runId), claimToken)) as [string, string?];
      if (answer[0] === "lost") return { status: "lost", state: answer[1] as RunState | "gone" };
      return { status: "ok" };
    });
  }

  async finish(request: FinishRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    return this.#redis("finish", async () => {
      const answer = (await this.#client.ccFinish(
        this.#key(request.runId),
        this.#live,
        this.#tombs,
        request.claimToken,
        request.state,
        request.purgeAt,
        request.runId,
      )) as [string, string | number];
      if (answer[0] === "lost") return { status: "lost", state: answer[1] as RunState | "gone" };
      return { status: "ok", bytes: Number(answer[1]) };
    });
  }

  async abort(selector: RunSelector, purgeAt: number): Promise<DroppedRun[]> {
    return this.#redis("abort", async () => {
      const pairs = SCOPE_FIELDS.filter(([field]) => selector[field] !== undefined).flatMap(
        ([field, short]) => [short, selector[field] as string],
      );
      const answer = (await this.#client.ccAbort(
        this.#live,
        this.#tombs,
        purgeAt,
        this.#prefix,
        selector.runId ?? "",
        ...pairs,
      )) as Array<string | number>;
      const dropped: DroppedRun[] = [];
      for (let index = 0; index + 1 < answer.length; index += 2) {
        dropped.push({ runId: String(answer[index]), bytes: Number(answer[index + 1]) });
      }
      return dropped;
    });
  }

  async sweep(now: number, purgeAt: number) {
    return this.#redis("sweep", async () => {
      const expired: DroppedRun[] = [];
      let skip = 0;
      // Bounded: each full batch either expires runs or skips past claimed ones.
      for (let batch = 0; batch < MAX_SWEEP_BATCHES; batch += 1) {
        const answer = (await this.#client.ccSweepExpire(
          this.#live,
          this.#tombs,
          now,
          purgeAt,
          this.#prefix,
          SWEEP_BATCH,
          skip,
        )) as Array<string | number>;
        skip += Number(answer[1]);
        for (let index = 2; index + 1 < answer.length; index += 2) {
          expired.push({ runId: String(answer[index]), bytes: Number(answer[index + 1]) });
        }
        if (Number(answer[0]) < SWEEP_BATCH) break;
      }
      let purged = 0;
      for (let batch = 0; batch < MAX_SWEEP_BATCHES; batch += 1) {
        const removed = Number(await this.#client.ccSweepPurge(this.#tombs, now, this.#prefix, SWEEP_BATCH));
        purged += removed;
        if (removed < SWEEP_BATCH) break;
      }
      return { expired, purged };
    });
  }

  async stats(): Promise<StoreStats> {
    return this.#redis("stats", async () => {
      const [live, running, tombstones, liveBytes] = (await this.#client.ccStats(
        this.#live,
        this.#tombs,
        this.#prefix,
      )) as number[];
      return {
        live: Number(live),
        waiting: Number(live) - Number(running),
        running: Number(running),
        tombstones: Number(tombstones),
        liveBytes: Number(liveBytes),
      };
    });
  }

  /**
   * Delivers the outcomes of the run's given calls: those recorded already, then each one as another
   * replica records it (Redis pub/sub, no polling). A call whose owning replica's lease has run out is
   * reported through `watcher.ownerGone` (checked when the lease would run out, not in a loop).
   */
  async watchOutcomes(
    runId: string,
    callIds: readonly string[],
    watcher: OutcomeWatcher,
  ): Promise<() => Promise<void>> {
    return this.#redis("wait", () =>
      watchOutcomes(
        {
          client: this.#client,
          codec: this.#codec,
          lease: this.#lease,
          subscriptions: this.#subscriptions,
          replicaId: this.replicaId,
          key: this.#key(runId),
          channel: this.#channel(runId),
        },
        runId,
        callIds,
        watcher,
      ),
    );
  }

  /** The quota index's keys (see `PUT_HOST`), after the record's own. */
  get #hostQuotaKeys(): string[] {
    const base = `${this.#prefix}hostq:`;
    return [`${base}meta`, `${base}order`, `${base}expiry`, `${base}total`];
  }

  async putHostRecord(
    key: string,
    valueJson: string,
    expiresAt: number,
    quota?: HostRecordQuota,
  ): Promise<HostPutAnswer | undefined> {
    const sealed = this.#seal.seal("value", key, valueJson);
    return this.#redis("putHostRecord", async () => {
      // Redis expires the key itself: no sweep needed, and every replica sees the same deadline.
      if (quota === undefined) {
        await this.#client.set(this.#hostRecordKey(key), sealed, "PXAT", expiresAt);
        return undefined;
      }
      // One script: the quota checked, room made and the record written atomically for every replica.
      const answer = await this.#client.ccPutHost(
        this.#hostRecordKey(key),
        ...this.#hostQuotaKeys,
        key,
        sealed,
        expiresAt,
        quota.owner,
        quota.bytes,
        quota.evictable ? 1 : 0,
        quota.maxRecordsPerOwner,
        quota.maxBytesPerOwner,
        quota.maxBytes,
        quota.now,
        this.#hostRecordKey(""),
        `${this.#prefix}hostq:owner:`,
      );
      if (Number(answer[0]) === 1) return { status: "ok", evicted: Number(answer[1]) };
      return {
        status: "full",
        limit: answer[1] === "owner" ? "owner" : "store",
        ownRecords: Number(answer[2]),
        ownBytes: Number(answer[3]),
      };
    });
  }

  async getHostRecord(key: string): Promise<string | null> {
    const stored = await this.#redis("getHostRecord", () => this.#client.get(this.#hostRecordKey(key)));
    return stored === null ? null : this.#seal.open("value", key, stored);
  }

  async deleteHostRecord(key: string): Promise<boolean> {
    return this.#redis(
      "deleteHostRecord",
      async () =>
        Number(
          await this.#client.ccDeleteHost(
            this.#hostRecordKey(key),
            ...this.#hostQuotaKeys,
            key,
            this.#hostRecordKey(""),
            `${this.#prefix}hostq:owner:`,
          ),
        ) > 0,
    );
  }

  async leaseHostRecord(key: string, holder: string, expiresAt: number): Promise<boolean> {
    // Sealing a holder gives the same text every time, so the script compares sealed values. Redis
    // expires the lease itself (every replica sees the same deadline); the script takes or renews it.
    const sealed = this.#seal.seal("lease", key, holder);
    return this.#redis("leaseHostRecord", async () => {
      if (Number(await this.#client.ccLeaseHost(this.#hostRecordKey(key), sealed, expiresAt)) === 1)
        return true;
      // Another holder's lease, unless it fails its check: then it is refused, not obeyed.
      const current = await this.#client.get(this.#hostRecordKey(key));
      if (current !== null) this.#seal.open("lease", key, current);
      return false;
    });
  }

  async releaseHostRecord(key: string, holder: string): Promise<boolean> {
    const sealed = this.#seal.seal("lease", key, holder);
    return this.#redis(
      "releaseHostRecord",
      async () => Number(await this.#client.ccReleaseHost(this.#hostRecordKey(key), sealed)) === 1,
    );
  }

  async close(): Promise<DroppedRun[]> {
    if (this.#closed) return [];
    this.#lease.stop();
    // Our calls stop with this process: let the next wait settle them as interrupted at once. If Redis
    // is away the mark is not written, and other replicas settle our calls once the lease runs out.
    await this.#lease.close().catch(() => {});
    this.#closed = true;
    this.#subscriptions.close();
    await this.#client.quit().catch(() => this.#client.disconnect());
    return [];
  }
}
