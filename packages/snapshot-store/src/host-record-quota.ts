import { CodeModeError } from "@codecell/contract";
import type { HostPutAnswer, HostRecordQuota } from "./backend.js";

/** A stored host record as eviction sees it. */
export type QuotaEntry = { key: string; bytes: number };

/** What the writer's and everyone's records hold now, the record being replaced left out. */
export type QuotaUsage = { ownCount: number; ownBytes: number; totalBytes: number };

/**
 * Which finished records to evict so a new one fits: first the writer's own, oldest first, until it is
 * within its quota (count and bytes); then anyone's, oldest first, until everything is within the
 * store's budget. `ownOldest` and `allOldest` list evictable records only (never one in use), oldest
 * first, without the key being written. When they cannot make room, nothing is evicted and the answer
 * says which limit holds: the writer's own (`owner`) or the store's (`store`).
 */
export function planHostPut(
  usage: QuotaUsage,
  quota: HostRecordQuota,
  ownOldest: Iterable<QuotaEntry>,
  allOldest: Iterable<QuotaEntry>,
): { evict: string[] } | Extract<HostPutAnswer, { status: "full" }> {
  const evict = new Set<string>();
  let { ownCount, ownBytes, totalBytes } = usage;
  const full = (limit: "owner" | "store") =>
    ({ status: "full", limit, ownRecords: usage.ownCount, ownBytes: usage.ownBytes }) as const;
  if (quota.bytes > quota.maxBytesPerOwner) return full("owner");
  if (quota.bytes > quota.maxBytes) return full("store");
  const ownOver = () =>
    ownCount + 1 > quota.maxRecordsPerOwner || ownBytes + quota.bytes > quota.maxBytesPerOwner;
  for (const entry of ownOver() ? ownOldest : []) {
    evict.add(entry.key);
    ownCount -= 1;
    ownBytes -= entry.bytes;
    totalBytes -= entry.bytes;
    if (!ownOver()) break;
  }
  if (ownOver()) return full("owner");
  for (const entry of totalBytes + quota.bytes > quota.maxBytes ? allOldest : []) {
    if (evict.has(entry.key)) continue;
    evict.add(entry.key);
    totalBytes -= entry.bytes;
    if (totalBytes + quota.bytes <= quota.maxBytes) break;
  }
  if (totalBytes + quota.bytes > quota.maxBytes) return full("store");
  return { evict: [...evict] };
}

/**
 * The refusal of a host record that does not fit. It names the writer's own use and the limit, never
 * anyone else's: the store's budget is reported as taken by records in use, not by whom.
 */
export function hostRecordRefusal(
  answer: Extract<HostPutAnswer, { status: "full" }>,
  quota: HostRecordQuota,
): CodeModeError {
  if (answer.limit === "owner") {
    return new CodeModeError(
      "snapshot_limit_exceeded",
      `putHostRecord: the record (${quota.bytes} bytes) does not fit this principal's quota of ${quota.maxRecordsPerOwner} records and ${quota.maxBytesPerOwner} bytes (snapshotStore.maxHostRecordsPerPrincipal, maxHostRecordBytesPerPrincipal): it holds ${answer.ownRecords} records of ${answer.ownBytes} bytes, and those still in use (a run waits on them) are never evicted. Finish or end some of its conversations, send smaller ones, or raise the quota.`,
    );
  }
  return new CodeModeError(
    "snapshot_limit_exceeded",
    `putHostRecord: the record (${quota.bytes} bytes) does not fit the store's budget for host records of ${quota.maxBytes} bytes (snapshotStore.maxHostRecordBytes): what it holds is in use and cannot be evicted now. Try again later, or raise the budget.`,
  );
}
