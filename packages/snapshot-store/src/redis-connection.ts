// The Redis client of the Redis backend: loading ioredis on first use, connecting, and defining one command per Lua script.
import { createRequire } from "node:module";
import { CodeModeError } from "@codecell/contract";
import type { Redis, RedisOptions } from "ioredis";
import type { RedisSnapshotBackendOptions } from "./redis-backend.js";
import * as scripts from "./redis-scripts.js";

// Loaded on first use, so a host on the memory or SQLite backend never loads the Redis client.
let RedisClient: typeof Redis | undefined;
function loadRedis(): typeof Redis {
  RedisClient ??= (createRequire(import.meta.url)("ioredis") as { Redis: typeof Redis }).Redis;
  return RedisClient;
}

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
  | "ccClose"
  | "ccLeaseHost"
  | "ccReleaseHost"
  | "ccPutHost"
  | "ccDeleteHost";

export type ScriptClient = Redis & {
  [name in ScriptName]: (...args: Array<string | number | Buffer>) => Promise<unknown[]>;
} & {
  ccClaimBuffer(...args: Array<string | number | Buffer>): Promise<Array<Buffer | Buffer[] | number>>;
};

/** Where the server is, without credentials, for messages and logs. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === "/" ? "" : parsed.pathname}`;
  } catch {
    // Not a URL at all: say so rather than echo a string that may hold credentials.
    return "(unparsable url)";
  }
}

export type ConnectionTarget = {
  where: string;
  url?: string;
  sentinel?: RedisOptions;
};

function configError(message: string): CodeModeError {
  return new CodeModeError("invalid_config", `Redis snapshot backend: ${message}`);
}

/** A standalone server's URL, or a Sentinel deployment's sentinels and master name: exactly one. */
export function connectionTarget(options: RedisSnapshotBackendOptions): ConnectionTarget {
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

/** A lazily connecting client (to a URL, or to the master the sentinels name) for every script. */
export function createScriptClient(target: ConnectionTarget, timeout: number): ScriptClient {
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
  const client = (
    target.url !== undefined
      ? new Client(target.url, clientOptions)
      : new Client({ ...clientOptions, ...target.sentinel })
  ) as ScriptClient;
  // Errors reach the caller through the failed command; the connection's own event would only crash.
  client.on("error", () => {});
  return client;
}

/** Defines one command per Lua script on `client`. */
export function defineScripts(client: ScriptClient): void {
  const define = (name: ScriptName, numberOfKeys: number, lua: string) =>
    client.defineCommand(name, { numberOfKeys, lua });
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
  define("ccLeaseHost", 1, scripts.LEASE_HOST);
  define("ccReleaseHost", 1, scripts.RELEASE_HOST);
  define("ccPutHost", 5, scripts.PUT_HOST);
  define("ccDeleteHost", 5, scripts.DELETE_HOST);
}
