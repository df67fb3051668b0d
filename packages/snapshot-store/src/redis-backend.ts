import { randomBytes, randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { CodeModeError } from "@codecell/contract";
import type { Redis, RedisOptions } from "ioredis";
import type {
  BackendClaimAnswer,
  BackendClaimedAnswer,
  BackendPendingCall,
  BackendRecord,
  BackendSettleAnswer,
  ClaimRequest,
  DroppedRun,
  FinishRequest,
  OutcomeWatcher,
  ReplaceRequest,
  SettleRequest,
  SnapshotBackend,
} from "./backend.js";
import { callEntries, deriveRecordKey, outcomeMac, recordMac, SCOPE_FIELDS, sameMac } from "./record-mac.js";
import * as scripts from "./redis-scripts.js";
import { MIN_SNAPSHOT_KEY_BYTES as MIN_SECRET_BYTES } from "./snapshot-key.js";
import type { RecoveryReport, RunScope, RunSelector, RunState, StoreStats } from "./types.js";

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

// Loaded on first use, so a host on the memory or SQLite backend never loads the Redis client.
let RedisClient: typeof Redis | undefined;
function loadRedis(): typeof Redis {
  RedisClient ??= (createRequire(import.meta.url)("ioredis") as { Redis: typeof Redis }).Redis;
  return RedisClient;
}

const DEFAULT_PREFIX = "codecell:";
const DEFAULT_LEASE_MS = 15_000;
const DEFAULT_TOMBSTONE_MS = 3_600_000;
/** How long Redis keeps a replica's "closed" lease and its "missing since" mark: longer than a run waits. */
const REPLICA_MARK_MS = 86_400_000;
/** How soon a watch looks at a call's owner again after Redis did not answer. */
const RETRY_MS = 500;
const SWEEP_BATCH = 250;
const MAX_SWEEP_BATCHES = 100_000;

type ScriptName =
  | "ccInsert"
  | "ccSettle"
  | "ccClaim"
  | "ccReplace"
  | "ccRelease"
  | "ccFinish"
  | "ccAbort"
  | "ccSweepExpire"
  | "ccSweepPurge"
  | "ccStats"
  | "ccOwnerState"
  | "ccRenew"
  | "ccClose";

type ScriptClient = Redis & {
  [name in ScriptName]: (...args: Array<string | number | Buffer>) => Promise<unknown[]>;
} & {
  ccClaimBuffer(...args: Array<string | number | Buffer>): Promise<Array<Buffer | Buffer[] | number>>;
};

/** The call data that is signed and stored per pending call (the owner and outcome live apart). */
type CallJson = { position: number; toolId: string; startedAt: string };

/** Where the server is, without credentials, for messages and logs. */
function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === "/" ? "" : parsed.pathname}`;
  } catch {
    return "(unparsable url)";
  }
}

type ConnectionTarget = {
  where: string;
  url?: string;
  sentinel?: RedisOptions;
};

function configError(message: string): CodeModeError {
  return new CodeModeError("invalid_config", `Redis snapshot backend: ${message}`);
}

/** A standalone server's URL, or a Sentinel deployment's sentinels and master name: exactly one. */
function connectionTarget(options: RedisSnapshotBackendOptions): ConnectionTarget {
  const hasUrl = options?.url !== undefined;
  const hasSentinels = options?.sentinels !== undefined;
  if (hasUrl === hasSentinels) {
    throw configError(
      hasUrl
        ? "give either url (a standalone server) or sentinels with name (a Sentinel deployment), not both; for Sentinel drop url and set username, password, db and tls as fields"
        : 'give url ("redis://host:6379") for a standalone server, or sentinels ([{ host, port }]) with name for a Sentinel deployment',
    );
  }
  if (hasUrl) {
    if (typeof options.url !== "string" || !/^rediss?:\/\//.test(options.url)) {
      throw configError(
        `url must start with redis:// or rediss:// (got ${typeof options.url === "string" ? JSON.stringify(describeUrl(options.url)) : String(options.url)})`,
      );
    }
    return { where: describeUrl(options.url), url: options.url };
  }
  const sentinels = options.sentinels;
  if (
    !Array.isArray(sentinels) ||
    sentinels.length === 0 ||
    !sentinels.every(
      (sentinel) =>
        typeof sentinel?.host === "string" &&
        sentinel.host.length > 0 &&
        Number.isInteger(sentinel.port) &&
        sentinel.port > 0 &&
        sentinel.port < 65_536,
    )
  ) {
    throw configError(
      'sentinels must be a non-empty array of { host, port }, e.g. [{ "host": "10.0.0.5", "port": 26379 }]',
    );
  }
  if (typeof options.name !== "string" || options.name.length === 0) {
    throw configError(
      'name (the master group name the sentinels monitor, e.g. "mymaster") is required with sentinels',
    );
  }
  if (options.db !== undefined && (!Number.isInteger(options.db) || options.db < 0)) {
    throw configError(`db must be a whole number of at least 0 (got ${String(options.db)})`);
  }
  const list = sentinels.map(({ host, port }) => `${host}:${port}`).join(",");
  return {
    where: `sentinel master "${options.name}" via ${list}`,
    sentinel: {
      sentinels: sentinels.map(({ host, port }) => ({ host, port })),
      name: options.name,
      // Each reconnection asks the sentinels for the master again, which finds a promoted replica.
      // ioredis's failoverDetector is left off: with it the client ended for good after a failover here.
      ...(options.username !== undefined ? { username: options.username } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(options.db !== undefined ? { db: options.db } : {}),
      ...(options.tls === true ? { tls: {} } : {}),
    },
  };
}

function secretBytes(secret: unknown): Buffer {
  const bytes =
    typeof secret === "string"
      ? Buffer.from(secret, "utf8")
      : secret instanceof Uint8Array
        ? Buffer.from(secret)
        : null;
  if (bytes === null || bytes.byteLength < MIN_SECRET_BYTES) {
    throw new CodeModeError(
      "invalid_config",
      `Redis snapshot backend: secret is required and must be at least ${MIN_SECRET_BYTES} bytes, shared by every replica ` +
        "(it signs each record so a record changed in Redis is never restored). Generate one with `openssl rand -base64 48`.",
    );
  }
  return bytes;
}

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
  readonly #secret: Buffer;
  readonly #leaseMs: number;
  readonly #client: ScriptClient;
  #subscriber: Redis | null = null;
  readonly #watchers = new Map<string, Set<(callId: string) => void>>();
  /** Each open watch's re-read of its calls, run when the subscriber reconnects (messages sent meanwhile are lost). */
  readonly #resyncs = new Set<() => void>();
  #leaseTimer: NodeJS.Timeout | undefined;
  #epoch = "";
  #closed = false;

  constructor(options: RedisSnapshotBackendOptions) {
    const target = connectionTarget(options);
    this.where = target.where;
    // A key of its own, derived from the shared secret: the sandbox signs snapshots with the secret
    // itself, and one key should not serve two purposes.
    this.#secret = deriveRecordKey(secretBytes(options.secret), "codecell redis records 1");
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
    const clientOptions = {
      lazyConnect: true,
      connectTimeout: timeout,
      commandTimeout: timeout,
      // Fail a command quickly while Redis is away instead of queueing it for minutes; the caller gets
      // runtime_unavailable and the model can try again.
      maxRetriesPerRequest: 1,
      retryStrategy: (attempt: number) => Math.min(attempt * 100, 1_000),
    };
    const Client = loadRedis();
    this.#client = (
      target.url !== undefined
        ? new Client(target.url, clientOptions)
        : new Client({ ...clientOptions, ...target.sentinel })
    ) as ScriptClient;
    // Errors reach the caller through the failed command; the connection's own event would only crash.
    this.#client.on("error", () => {});
    // A Redis that restarted (even from a persisted dataset) may have lost this replica's lease: renew it
    // as soon as the connection is back rather than at the next tick, so other replicas do not take our
    // live calls for interrupted ones.
    this.#client.on("ready", () => {
      if (this.#leaseTimer !== undefined && !this.#closed) void this.#renewLease().catch(() => {});
    });
    const define = (name: ScriptName, numberOfKeys: number, lua: string) =>
      this.#client.defineCommand(name, { numberOfKeys, lua });
    define("ccInsert", 2, scripts.INSERT);
    define("ccSettle", 1, scripts.SETTLE);
    define("ccClaim", 4, scripts.CLAIM);
    define("ccReplace", 2, scripts.REPLACE);
    define("ccRelease", 1, scripts.RELEASE);
    define("ccFinish", 3, scripts.FINISH);
    define("ccAbort", 2, scripts.ABORT);
    define("ccSweepExpire", 2, scripts.SWEEP_EXPIRE);
    define("ccSweepPurge", 1, scripts.SWEEP_PURGE);
    define("ccStats", 2, scripts.STATS);
    define("ccOwnerState", 0, scripts.OWNER_STATE);
    define("ccRenew", 0, scripts.RENEW);
    define("ccClose", 0, scripts.CLOSE);
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

  #recordMac(
    runId: string,
    scope: RunScope,
    parts: RecordParts,
    calls: ReadonlyArray<readonly [string, string]>,
  ): Buffer {
    return recordMac(this.#secret, "codecell-run-1", { runId, scope, ...parts }, calls);
  }

  #outcomeMac(runId: string, callId: string, outcomeJson: string, settledAt: string): Buffer {
    return outcomeMac(this.#secret, "codecell-outcome-1", runId, callId, outcomeJson, settledAt);
  }

  /** Call id and signed call JSON, in order. */
  #callEntries(calls: BackendPendingCall[]) {
    return callEntries(calls);
  }

  async recover(): Promise<RecoveryReport> {
    return this.#redis("open", async () => {
      await this.#client.connect();
      await this.#renewLease();
      this.#leaseTimer = setInterval(() => void this.#renewLease().catch(() => {}), this.#leaseMs / 3);
      this.#leaseTimer.unref();
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

  async #renewLease(): Promise<void> {
    await this.#client.ccRenew(this.#prefix, this.replicaId, this.#leaseMs, REPLICA_MARK_MS);
  }

  async insert(record: BackendRecord, maxLiveRuns: number, tombstoneMs = DEFAULT_TOMBSTONE_MS) {
    return this.#redis("suspend", async () => {
      const calls = this.#callEntries(record.pendingCalls);
      const mac = this.#recordMac(record.runId, record.scope, record, calls);
      const fields: Array<string | number | Buffer> = [
        "st",
        "waiting",
        ...SCOPE_FIELDS.flatMap(([field, short]) => [short, record.scope[field]]),
        "snap",
        Buffer.from(record.snapshot.buffer, record.snapshot.byteOffset, record.snapshot.byteLength),
        "out",
        record.outputJson,
        "tel",
        record.telemetryJson,
        "ca",
        record.createdAt,
        "ua",
        record.updatedAt,
        "ex",
        record.expiresAt,
        "by",
        record.bytes,
        "rc",
        record.resumeCount,
        "lu",
        0,
        "ret",
        tombstoneMs,
        "mac",
        mac.toString("base64"),
      ];
      if (record.hostStateJson !== null) fields.push("hs", record.hostStateJson);
      record.pendingCalls.forEach((call, index) => {
        const [callId, json] = calls[index]!;
        fields.push(`c:${callId}`, json, `o:${callId}`, this.replicaId);
        if (call.outcomeJson !== null) {
          const settledAt = call.settledAt ?? "";
          fields.push(
            `r:${callId}`,
            call.outcomeJson,
            `a:${callId}`,
            settledAt,
            `m:${callId}`,
            this.#outcomeMac(record.runId, callId, call.outcomeJson, settledAt).toString("base64"),
          );
        }
      });
      const keyTtl = Math.max(1, record.expiresAt - record.createdAt) + tombstoneMs;
      const answer = (await this.#client.ccInsert(
        this.#key(record.runId),
        this.#live,
        maxLiveRuns,
        record.expiresAt,
        keyTtl,
        record.runId,
        this.#prefix,
        this.#leaseMs,
        ...fields,
      )) as [string, number?, number?];
      if (answer[0] === "full") {
        return { status: "full" as const, live: Number(answer[1]), cap: Number(answer[2]) };
      }
      if (answer[0] === "taken") return { status: "taken" as const };
      return { status: "ok" as const };
    });
  }

  async settle(request: SettleRequest): Promise<BackendSettleAnswer> {
    return this.#redis("settleCall", async () => {
      const mac = this.#outcomeMac(request.runId, request.callId, request.outcomeJson, request.settledAt);
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
        // (for as long as tombstones last) instead of hearing "unknown runId".
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
    const hash = new Map<string, Buffer>();
    for (let index = 0; index + 1 < flat.length; index += 2)
      hash.set(flat[index]!.toString("utf8"), flat[index + 1]!);
    const text = (field: string) => hash.get(field)?.toString("utf8");
    const number = (field: string) => Number(text(field) ?? 0);
    const scope = Object.fromEntries(
      SCOPE_FIELDS.map(([field, short]) => [field, text(short) ?? ""]),
    ) as RunScope;
    const callIds = [...hash.keys()].filter((field) => field.startsWith("c:")).map((field) => field.slice(2));
    const calls = callIds
      .map((callId) => ({ callId, json: text(`c:${callId}`)! }))
      .map((entry) => ({ ...entry, call: JSON.parse(entry.json) as CallJson }))
      .sort((a, b) => a.call.position - b.call.position);
    const snapshotBuffer = hash.get("snap") ?? Buffer.alloc(0);
    const parts: RecordParts = {
      snapshot: new Uint8Array(snapshotBuffer.buffer, snapshotBuffer.byteOffset, snapshotBuffer.byteLength),
      outputJson: text("out") ?? "",
      telemetryJson: text("tel") ?? "",
      hostStateJson: text("hs") ?? null,
    };
    let intact = sameMac(
      this.#recordMac(
        request.runId,
        scope,
        parts,
        calls.map(({ callId, json }) => [callId, json]),
      ),
      text("mac"),
    );
    const pendingCalls: BackendPendingCall[] = calls.map(({ callId, call }) => {
      const outcomeJson = text(`r:${callId}`) ?? null;
      const settledAt = text(`a:${callId}`) ?? null;
      if (
        outcomeJson !== null &&
        !sameMac(this.#outcomeMac(request.runId, callId, outcomeJson, settledAt ?? ""), text(`m:${callId}`))
      ) {
        intact = false;
      }
      return { callId, toolId: call.toolId, startedAt: call.startedAt, outcomeJson, settledAt };
    });
    if (!intact) {
      // Never restore a record this deployment did not write; end it so it cannot be tried again.
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
    return {
      runId: request.runId,
      scope,
      ...parts,
      pendingCalls,
      createdAt: number("ca"),
      updatedAt: number("ua"),
      expiresAt: number("ex"),
      bytes: number("by"),
      resumeCount: number("rc"),
    };
  }

  async replace(request: ReplaceRequest): Promise<BackendClaimedAnswer<{ bytes: number }>> {
    return this.#redis("resuspend", async () => {
      const head = await this.#client.hmget(
        this.#key(request.runId),
        ...SCOPE_FIELDS.map(([, short]) => short),
      );
      const scope = Object.fromEntries(
        SCOPE_FIELDS.map(([field], index) => [field, head[index] ?? ""]),
      ) as RunScope;
      const calls = this.#callEntries(request.pendingCalls);
      const mac = this.#recordMac(request.runId, scope, request, calls);
      const callArgs = request.pendingCalls.flatMap((call, index) => {
        const settledAt = call.settledAt ?? "";
        return [
          call.callId,
          calls[index]![1],
          call.outcomeJson ?? "",
          settledAt,
          call.outcomeJson === null
            ? ""
            : this.#outcomeMac(request.runId, call.callId, call.outcomeJson, settledAt).toString("base64"),
        ];
      });
      const parts: Array<string | number | Buffer> = [
        "snap",
        Buffer.from(request.snapshot.buffer, request.snapshot.byteOffset, request.snapshot.byteLength),
        "out",
        request.outputJson,
        "tel",
        request.telemetryJson,
        "ua",
        request.updatedAt,
        "ex",
        request.expiresAt,
        "mac",
        mac.toString("base64"),
      ];
      if (request.hostStateJson !== null) parts.push("hs", request.hostStateJson);
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
    return this.#redis("wait", async () => {
      const pending = new Set(callIds);
      const timers = new Set<NodeJS.Timeout>();
      const key = this.#key(runId);
      const channel = this.#channel(runId);
      let stopped = false;

      const deliver = async (callId: string): Promise<boolean> => {
        const [outcomeJson = null, settledAt, mac] = await this.#client.hmget(
          key,
          `r:${callId}`,
          `a:${callId}`,
          `m:${callId}`,
        );
        if (outcomeJson === null || stopped || !pending.has(callId)) return outcomeJson !== null;
        pending.delete(callId);
        if (sameMac(this.#outcomeMac(runId, callId, outcomeJson, settledAt ?? ""), mac ?? undefined)) {
          watcher.outcome(callId, outcomeJson);
        } else {
          watcher.outcome(
            callId,
            JSON.stringify({
              ok: false,
              error: {
                name: "CodeModeError",
                code: "snapshot_restore_failed",
                message: `the result of nested call ${callId} failed the snapshot store's integrity check and was dropped`,
              },
            }),
          );
        }
        return true;
      };
      const schedule = (callId: string, afterMs: number) => {
        if (stopped) return;
        const timer = setTimeout(() => {
          timers.delete(timer);
          void checkOwner(callId);
        }, afterMs);
        timer.unref();
        timers.add(timer);
      };
      // Asks Redis how the call's owner stands, and looks again when that could change: when its lease
      // would run out, or when a missing lease's grace period ends (the mark lives in Redis, so it is
      // counted once however many waits and replicas look). Redis away: look again soon.
      const checkOwner = async (callId: string): Promise<void> => {
        if (stopped || !pending.has(callId)) return;
        try {
          const [owner = null, call = null] = await this.#client.hmget(key, `o:${callId}`, `c:${callId}`);
          if (owner === null || call === null || owner === this.replicaId) return;
          const [state, ms] = (await this.#client.ccOwnerState(
            this.#prefix,
            owner,
            this.#leaseMs,
            REPLICA_MARK_MS,
          )) as [string, number];
          if (stopped || !pending.has(callId)) return;
          if (state !== "gone") {
            schedule(callId, Number(ms) + 25);
            return;
          }
          await watcher.ownerGone(callId, (JSON.parse(call) as CallJson).toolId);
          // Whichever outcome won (this one, or the owner's own a moment before), read it now rather
          // than count on the published message.
          await deliver(callId);
        } catch {
          schedule(callId, RETRY_MS);
        }
      };
      const onMessage = (callId: string) => {
        if (pending.has(callId)) void deliver(callId).catch(() => {});
      };

      // A subscriber that reconnected missed what was published meanwhile: read the calls again.
      const resync = () => {
        for (const callId of pending) void deliver(callId).catch(() => {});
      };
      await this.#subscribe(channel, onMessage);
      this.#resyncs.add(resync);
      // Subscribed first, then read: an outcome recorded in between is seen by one or the other.
      for (const callId of callIds) {
        if (!(await deliver(callId))) await checkOwner(callId);
      }
      return async () => {
        stopped = true;
        this.#resyncs.delete(resync);
        for (const timer of timers) clearTimeout(timer);
        await this.#unsubscribe(channel, onMessage).catch(() => {});
      };
    });
  }

  async #subscribe(channel: string, onMessage: (callId: string) => void): Promise<void> {
    if (this.#subscriber === null) {
      const subscriber = this.#client.duplicate();
      subscriber.on("error", () => {});
      let connectedBefore = false;
      subscriber.on("ready", () => {
        if (connectedBefore) for (const resync of this.#resyncs) resync();
        connectedBefore = true;
      });
      subscriber.on("message", (from: string, message: string) => {
        for (const listener of this.#watchers.get(from) ?? []) listener(message);
      });
      this.#subscriber = subscriber;
    }
    let listeners = this.#watchers.get(channel);
    if (listeners === undefined) {
      listeners = new Set();
      this.#watchers.set(channel, listeners);
      listeners.add(onMessage);
      await this.#subscriber.subscribe(channel);
    } else {
      listeners.add(onMessage);
    }
  }

  async #unsubscribe(channel: string, onMessage: (callId: string) => void): Promise<void> {
    const listeners = this.#watchers.get(channel);
    if (listeners === undefined) return;
    listeners.delete(onMessage);
    if (listeners.size > 0) return;
    this.#watchers.delete(channel);
    await this.#subscriber?.unsubscribe(channel);
  }

  async putHostRecord(key: string, valueJson: string, expiresAt: number): Promise<void> {
    await this.#redis("putHostRecord", async () => {
      // Redis expires the key itself: no sweep needed, and every replica sees the same deadline.
      await this.#client.set(this.#hostRecordKey(key), valueJson, "PXAT", expiresAt);
    });
  }

  async getHostRecord(key: string): Promise<string | null> {
    return this.#redis("getHostRecord", () => this.#client.get(this.#hostRecordKey(key)));
  }

  async deleteHostRecord(key: string): Promise<boolean> {
    return this.#redis(
      "deleteHostRecord",
      async () => (await this.#client.del(this.#hostRecordKey(key))) > 0,
    );
  }

  async close(): Promise<DroppedRun[]> {
    if (this.#closed) return [];
    if (this.#leaseTimer !== undefined) clearInterval(this.#leaseTimer);
    this.#leaseTimer = undefined;
    // Our calls stop with this process: let the next wait settle them as interrupted at once.
    await this.#client.ccClose(this.#prefix, this.replicaId, REPLICA_MARK_MS).catch(() => {});
    this.#closed = true;
    this.#watchers.clear();
    this.#resyncs.clear();
    this.#subscriber?.disconnect();
    await this.#client.quit().catch(() => this.#client.disconnect());
    return [];
  }
}

type RecordParts = {
  snapshot: Uint8Array;
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
};
