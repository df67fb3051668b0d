import {
  keyFileFor,
  loadSnapshotKey,
  MemorySnapshotBackend,
  openSnapshotStore,
  RedisSnapshotBackend,
  type SnapshotBackend,
  type SnapshotStore,
  SqliteSnapshotBackend,
} from "@codecell/snapshot-store";
import type { GatewayConfig } from "../config/load-config.js";
import type { SnapshotStoreSpec } from "../config/snapshot-store-config.js";

/** The store's backend as the config names it. */
export function snapshotBackend(
  spec: GatewayConfig["snapshotStore"],
  snapshotSecret: string,
): SnapshotBackend {
  switch (spec.kind) {
    case "sqlite":
      // The snapshot key also signs the rest of each row (outcomes, output, host state): a resume
      // trusts them as much as the snapshot.
      return new SqliteSnapshotBackend({ path: spec.path, secret: snapshotSecret });
    case "redis":
      return new RedisSnapshotBackend({
        ...("url" in spec
          ? { url: spec.url }
          : {
              sentinels: spec.sentinels,
              name: spec.name,
              ...(spec.username !== undefined ? { username: spec.username } : {}),
              ...(spec.password !== undefined ? { password: spec.password } : {}),
              ...(spec.db !== undefined ? { db: spec.db } : {}),
              ...(spec.tls !== undefined ? { tls: spec.tls } : {}),
            }),
        secret: spec.secret,
        ...(spec.keyPrefix !== undefined ? { keyPrefix: spec.keyPrefix } : {}),
        ...(spec.replicaLeaseMs !== undefined ? { replicaLeaseMs: spec.replicaLeaseMs } : {}),
      });
    case "memory":
      return new MemorySnapshotBackend();
  }
}

/** Opens the config's snapshot store, with the key that signs its snapshots. */
export async function openGatewayStore(
  config: GatewayConfig,
): Promise<{ store: SnapshotStore; snapshotSecret: string }> {
  // Snapshots are always signed (HMAC-SHA-256): a durable store's key comes from the config or a
  // 0600 key file generated beside it, so whoever can write the store file alone cannot forge a run.
  // On Redis the config's secret is required, and every replica signs with it, so any replica can
  // restore a snapshot another one took.
  const spec = config.snapshotStore;
  const snapshotSecret = loadSnapshotKey(
    spec.kind === "memory"
      ? { kind: "ephemeral" }
      : spec.kind === "redis" || spec.secret
        ? { kind: "secret", secret: spec.secret as string }
        : { kind: "keyFile", path: keyFileFor(spec.path) },
  );
  const store = await openSnapshotStore({
    backend: snapshotBackend(config.snapshotStore, snapshotSecret),
    ...(config.snapshotStore.maxLiveRuns !== undefined
      ? { maxLiveRuns: config.snapshotStore.maxLiveRuns }
      : {}),
    ...hostRecordLimits(config.snapshotStore),
    ...(config.snapshotStore.maxLiveRunsPerPrincipal !== undefined
      ? { maxLiveRunsPerPrincipal: config.snapshotStore.maxLiveRunsPerPrincipal }
      : {}),
    maxSnapshotBytes: config.codeMode.maxSnapshotBytes,
    snapshotTtlSeconds: config.codeMode.snapshotTtlSeconds,
  });
  return { store, snapshotSecret };
}

/** The host-record quotas the config sets; the store's defaults for the rest. */
function hostRecordLimits(spec: SnapshotStoreSpec) {
  const { maxHostRecordsPerPrincipal, maxHostRecordBytesPerPrincipal, maxHostRecordBytes } = spec;
  return Object.fromEntries(
    Object.entries({ maxHostRecordsPerPrincipal, maxHostRecordBytesPerPrincipal, maxHostRecordBytes }).filter(
      ([, value]) => value !== undefined,
    ),
  );
}
