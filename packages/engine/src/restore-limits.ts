import { CodeModeError, type ResolvedCodeModeConfig } from "@codecell/contract";

/**
 * Why a suspended run may not be restored under this engine's limits, or null when it may. A run's VM
 * was allowed to grow up to the memory limit it ran under, and its snapshot was held to the snapshot
 * limit of its time: a restart, or another replica, with a tighter config must not take it on (the
 * restored heap could exceed the new memory limit from its first instruction; the snapshot already
 * does exceed the new snapshot limit). `suspendedUnder` is the memory limit recorded at the suspend;
 * runs stored before it was recorded carry none, and only their snapshot size is checked.
 */
export function restoreLimitError(
  snapshotBytes: number,
  suspendedUnder: number | undefined,
  config: Pick<ResolvedCodeModeConfig, "maxSnapshotBytes" | "memoryLimitBytes">,
): CodeModeError | null {
  if (snapshotBytes > config.maxSnapshotBytes) {
    return new CodeModeError(
      "snapshot_limit_exceeded",
      `The run cannot be resumed here: its snapshot is ${snapshotBytes} bytes, over this host's tools.codeMode.maxSnapshotBytes (${config.maxSnapshotBytes}); it was suspended under a larger limit (a restart or another replica with a different config). The run is discarded: run the cell again with exec, and give every replica the same maxSnapshotBytes (at least ${snapshotBytes}) to resume such runs.`,
      { limit: "maxSnapshotBytes", snapshotBytes, maxSnapshotBytes: config.maxSnapshotBytes },
    );
  }
  if (suspendedUnder !== undefined && suspendedUnder > config.memoryLimitBytes) {
    return new CodeModeError(
      "memory_limit_exceeded",
      `The run cannot be resumed here: it ran under tools.codeMode.memoryLimitBytes ${suspendedUnder}, and this host's limit is ${config.memoryLimitBytes}, so its restored heap could exceed it (a restart or another replica with a different config). The run is discarded: run the cell again with exec, and give every replica the same memoryLimitBytes (at least ${suspendedUnder}) to resume such runs.`,
      { limit: "memoryLimitBytes", suspendedUnder, memoryLimitBytes: config.memoryLimitBytes },
    );
  }
  return null;
}
