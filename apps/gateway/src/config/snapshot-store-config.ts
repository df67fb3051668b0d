import { existsSync } from "node:fs";
import { dirname } from "node:path";
import {
  DEFAULT_HOST_RECORD_LIMITS,
  DEFAULT_MAX_LIVE_RUNS,
  MIN_SNAPSHOT_KEY_BYTES,
} from "@codecell/snapshot-store";
import type { ConfigProblem } from "./config-problem.js";
import type { GatewayConfigFile } from "./config-schema.js";
import { absolute } from "./resolve-module.js";

export type SnapshotStoreSpec = (
  | { kind: "memory" }
  /** `secret` signs snapshots; absent, a key file is generated beside the database (`<path>.key`). */
  | { kind: "sqlite"; path: string; secret?: string }
  /** `secret` signs snapshots and records, and must be the same on every replica. */
  | ({ kind: "redis"; secret: string; keyPrefix?: string; replicaLeaseMs?: number } & (
      | { url: string }
      /** A Sentinel deployment: the sentinels, the master's name, and how to log in to the master. */
      | {
          sentinels: Array<{ host: string; port: number }>;
          name: string;
          username?: string;
          password?: string;
          db?: number;
          tls?: boolean;
        }
    ))
) & {
  maxLiveRuns?: number;
  maxLiveRunsPerPrincipal?: number;
  maxHostRecordsPerPrincipal?: number;
  maxHostRecordBytesPerPrincipal?: number;
  maxHostRecordBytes?: number;
};

type SnapshotStoreSection = NonNullable<GatewayConfigFile["snapshotStore"]>;
type SqliteSection = Extract<SnapshotStoreSection, { kind: "sqlite" }>;
type RedisSection = Extract<SnapshotStoreSection, { kind: "redis" }>;

function sqliteStore(section: SqliteSection, configDir: string, file: string, problems: ConfigProblem[]) {
  const path = absolute(configDir, section.path);
  if (!existsSync(dirname(path))) {
    problems.push({
      file,
      path: "snapshotStore.path",
      message: `folder ${dirname(path)} does not exist. Create it first.`,
    });
  }
  const secret = section.secret;
  if (secret !== undefined && Buffer.byteLength(secret) < MIN_SNAPSHOT_KEY_BYTES) {
    problems.push({
      file,
      path: "snapshotStore.secret",
      message: `has ${Buffer.byteLength(secret)} bytes; at least ${MIN_SNAPSHOT_KEY_BYTES} are needed (e.g. openssl rand -base64 48, passed as "\${CODECELL_SNAPSHOT_SECRET}"), or leave it out to have a key file generated beside the database.`,
    });
  }
  return { kind: "sqlite" as const, path, ...(secret ? { secret } : {}) };
}

/** A Redis store reaches one server by `url` or a Sentinel deployment by `sentinels` and `name`, not both. */
function redisStore(section: RedisSection, file: string, problems: ConfigProblem[]): SnapshotStoreSpec {
  const { url, sentinels, name, username, password, db, tls, keyPrefix, secret, replicaLeaseMs } = section;
  const sentinelOnly = { name, username, password, db, tls };
  if ((url === undefined) === (sentinels === undefined)) {
    problems.push({
      file,
      path: "snapshotStore",
      message:
        url === undefined
          ? 'a redis store needs "url" (a standalone server, "redis://host:6379") or "sentinels" with "name" (a Sentinel deployment, e.g. "sentinels": [{ "host": "10.0.0.5", "port": 26379 }], "name": "mymaster").'
          : 'has both "url" and "sentinels": keep "url" for a standalone server, or drop it for a Sentinel deployment (and give the password, db and tls it held as "password", "db" and "tls").',
    });
  } else if (sentinels !== undefined && name === undefined) {
    problems.push({
      file,
      path: "snapshotStore.name",
      message:
        'is missing: with "sentinels", give the master group name the Sentinels monitor (sentinel monitor <name> ...), e.g. "name": "mymaster".',
    });
  } else if (url !== undefined) {
    for (const [field, value] of Object.entries(sentinelOnly)) {
      if (value === undefined) continue;
      problems.push({
        file,
        path: `snapshotStore.${field}`,
        message: `applies only with "sentinels"; with "url" put it in the URL (redis://user:password@host:port/db, rediss:// for TLS) or drop it.`,
      });
    }
  }
  const target =
    sentinels !== undefined
      ? {
          sentinels,
          name: name ?? "",
          ...(username !== undefined ? { username } : {}),
          ...(password !== undefined ? { password } : {}),
          ...(db !== undefined ? { db } : {}),
          ...(tls !== undefined ? { tls } : {}),
        }
      : { url: url ?? "" };
  return {
    kind: "redis",
    ...target,
    secret,
    ...(keyPrefix !== undefined ? { keyPrefix } : {}),
    ...(replicaLeaseMs !== undefined ? { replicaLeaseMs } : {}),
  };
}

/** The validated `snapshotStore` section (undefined: absent or invalid) as the store to open; memory by default. */
export function resolveSnapshotStore(
  section: GatewayConfigFile["snapshotStore"],
  configDir: string,
  file: string,
  problems: ConfigProblem[],
): SnapshotStoreSpec {
  const store: SnapshotStoreSpec =
    section?.kind === "sqlite"
      ? sqliteStore(section, configDir, file, problems)
      : section?.kind === "redis"
        ? redisStore(section, file, problems)
        : { kind: "memory" };
  if (section?.maxLiveRuns !== undefined) store.maxLiveRuns = section.maxLiveRuns;
  if (section?.maxLiveRunsPerPrincipal !== undefined) {
    if (section.maxLiveRunsPerPrincipal > (section.maxLiveRuns ?? DEFAULT_MAX_LIVE_RUNS)) {
      problems.push({
        file,
        path: "snapshotStore.maxLiveRunsPerPrincipal",
        message: `${section.maxLiveRunsPerPrincipal} is above maxLiveRuns (${section.maxLiveRuns ?? DEFAULT_MAX_LIVE_RUNS}). Lower it, or raise snapshotStore.maxLiveRuns.`,
      });
    } else store.maxLiveRunsPerPrincipal = section.maxLiveRunsPerPrincipal;
  }
  if (section?.maxHostRecordsPerPrincipal !== undefined) {
    store.maxHostRecordsPerPrincipal = section.maxHostRecordsPerPrincipal;
  }
  const budget = section?.maxHostRecordBytes ?? DEFAULT_HOST_RECORD_LIMITS.maxHostRecordBytes;
  const perPrincipal = section?.maxHostRecordBytesPerPrincipal;
  if (perPrincipal !== undefined && perPrincipal > budget) {
    problems.push({
      file,
      path: "snapshotStore.maxHostRecordBytesPerPrincipal",
      message: `${perPrincipal} is above maxHostRecordBytes (${budget}). Lower it, or raise snapshotStore.maxHostRecordBytes.`,
    });
  } else {
    if (perPrincipal !== undefined) store.maxHostRecordBytesPerPrincipal = perPrincipal;
    if (section?.maxHostRecordBytes !== undefined) store.maxHostRecordBytes = section.maxHostRecordBytes;
  }
  return store;
}
