// This replica's lease in Redis (renewed on a timer and on reconnect, marked closed on close) and how another replica's lease stands.
import type { ScriptClient } from "./redis-connection.js";

export const DEFAULT_LEASE_MS = 15_000;
/** How long Redis keeps a replica's "closed" lease and its "missing since" mark: longer than a run waits. */
export const REPLICA_MARK_MS = 86_400_000;

export class ReplicaLease {
  readonly #client: ScriptClient;
  readonly #prefix: string;
  readonly #replicaId: string;
  readonly #leaseMs: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(client: ScriptClient, prefix: string, replicaId: string, leaseMs: number) {
    this.#client = client;
    this.#prefix = prefix;
    this.#replicaId = replicaId;
    this.#leaseMs = leaseMs;
  }

  /** Whether the renewal timer runs (between `start` and `stop`). */
  get started(): boolean {
    return this.#timer !== undefined;
  }

  async renew(): Promise<void> {
    await this.#client.ccRenew(this.#prefix, this.#replicaId, this.#leaseMs, REPLICA_MARK_MS);
  }

  /** Renews the lease every third of its length. */
  start(): void {
    // A failed renewal is tried again at the next tick (and at once on reconnect); the lease outlasts
    // two missed ones, and there is no caller to tell.
    this.#timer = setInterval(() => void this.renew().catch(() => {}), this.#leaseMs / 3);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Marks the lease closed, so the next wait settles this replica's calls as interrupted at once. */
  async close(): Promise<void> {
    await this.#client.ccClose(this.#prefix, this.#replicaId, REPLICA_MARK_MS);
  }

  /**
   * How `owner`'s lease stands, and in how many ms that could change. "gone" once its lease has been
   * missing for one more lease period (the mark lives in Redis, counted once for the deployment).
   */
  async ownerState(owner: string): Promise<[string, number]> {
    return (await this.#client.ccOwnerState(this.#prefix, owner, this.#leaseMs, REPLICA_MARK_MS)) as [
      string,
      number,
    ];
  }
}
