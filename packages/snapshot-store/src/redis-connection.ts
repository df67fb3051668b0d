// The Redis client of the Redis backend: loading ioredis on first use, connecting, and defining one command per Lua script.
import { createRequire } from "node:module";
import type { Redis } from "ioredis";
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
  | "ccClose";

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

/** A lazily connecting client with every script of `redis-scripts` defined as a command. */
export function createScriptClient(url: string, timeout: number): ScriptClient {
  const client = new (loadRedis())(url, {
    lazyConnect: true,
    connectTimeout: timeout,
    commandTimeout: timeout,
    // Fail a command quickly while Redis is away instead of queueing it for minutes; the caller gets
    // runtime_unavailable and the model can try again.
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
  }) as ScriptClient;
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
}
