// The values cells keep between cells (`store(key, value)`, `load(key)`): one host record of the
// snapshot store per conversation, so they outlive a gateway restart on a durable store and every
// replica sharing the store reads them; and one usage record per principal, for its byte cap.
//
// A write reads the conversation's record, changes it and writes it back, under a lease of the snapshot
// store (atomic in every backend) so that two replicas, or two stores of one cell, never lose each
// other's keys. Writes of one conversation in this process also queue behind each other, so they do not
// spin on the lease.

import { randomUUID } from "node:crypto";
import { CodeModeError, type JsonValue } from "@codecell/contract";
import { principalOf, type SnapshotStore } from "@codecell/snapshot-store";
import type { RunContext } from "./types.js";

const VALUES_KIND = "cell-store";
const VALUES_LOCK_KIND = "cell-store-lock";
const USAGE_KIND = "cell-store-usage";
const USAGE_LOCK_KIND = "cell-store-usage-lock";
const USAGE_ID = "principal";

/** A write holds its lease at most this long; a process that died holding it blocks no one for longer. */
const LEASE_SECONDS = 10;
/** How long a write waits for a lease another writer holds before it gives up. */
const LEASE_WAIT_MS = 15_000;
/** How long expired values are still known as expired (a load says so) before they are gone for good. */
const EXPIRED_MEMORY_SECONDS = 3_600;
const MAX_TTL_SECONDS = 86_400;

export const MAX_STORE_KEY_LENGTH = 256;

/** The caps and lifetime of stored values (`tools.codeMode.storeTtlSeconds` and the three byte caps). */
export type CellStoreLimits = {
  storeTtlSeconds: number;
  maxStoreValueBytes: number;
  maxStoreBytes: number;
  maxStorePrincipalBytes: number;
};

/** Whose values: the principal (agent and session key) and its conversation (the run context's session). */
export type CellStoreScope = { owner: string; conversation: string };

export function cellStoreScope(
  context: Pick<RunContext, "agentId" | "sessionKey" | "sessionId">,
): CellStoreScope {
  return {
    owner: principalOf({
      agentId: context.agentId,
      sessionKey: context.sessionKey,
      sessionId: context.sessionId,
      parentRunId: "",
      toolCallId: "",
    }),
    conversation: context.sessionId,
  };
}

/** One conversation's record: each value with its JSON size, and when the values expire (epoch ms). */
type ValuesRecord = { expiresAt: number; bytes: number; values: Record<string, { json: string }> };
/** One principal's record: the bytes and expiry of each of its conversations' values. */
type UsageRecord = { conversations: Record<string, { bytes: number; expiresAt: number }> };

/** What a store operation did, for its trajectory entry, span and metrics: never the value itself. */
export type CellStoreAnswer = { value: JsonValue; bytes: number };

const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8");

function checkKey(key: unknown, what: string): string {
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_STORE_KEY_LENGTH) {
    throw new CodeModeError(
      "invalid_input",
      `${what}: key must be a string of 1 to ${MAX_STORE_KEY_LENGTH} characters`,
    );
  }
  return key;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class CellStore {
  /** The tail of each lock's queue of writers in this process. */
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #holder = `cell-store:${randomUUID()}`;

  constructor(
    readonly store: Promise<SnapshotStore>,
    readonly limits: CellStoreLimits,
    readonly clock: () => number = Date.now,
  ) {}

  /** The value stored under `key`, `{}` when there is none (the guest reads that as undefined). */
  async get(scope: CellStoreScope, key: string): Promise<CellStoreAnswer> {
    checkKey(key, "load(key)");
    const record = await this.#read(scope);
    const entry = record?.values[key];
    if (record === null || entry === undefined) return { value: {}, bytes: 0 };
    if (record.expiresAt <= this.clock()) {
      throw new CodeModeError(
        "snapshot_expired",
        `load("${key}"): the value expired; stored values live ${this.limits.storeTtlSeconds} s after the conversation's last store (tools.codeMode.storeTtlSeconds). Compute it again and store it.`,
      );
    }
    return { value: { value: JSON.parse(entry.json) as JsonValue }, bytes: utf8Bytes(entry.json) };
  }

  async keys(scope: CellStoreScope): Promise<CellStoreAnswer> {
    const record = await this.#read(scope);
    const keys = record === null || record.expiresAt <= this.clock() ? [] : Object.keys(record.values);
    return { value: keys, bytes: 0 };
  }

  /** Stores `value` under `key`; every value of the conversation then lives a full TTL again. */
  async set(scope: CellStoreScope, key: string, value: JsonValue): Promise<CellStoreAnswer> {
    checkKey(key, "store(key, value)");
    const json = JSON.stringify(value);
    const bytes = utf8Bytes(json);
    const { maxStoreValueBytes, maxStoreBytes } = this.limits;
    if (bytes > maxStoreValueBytes) {
      throw new CodeModeError(
        "output_limit_exceeded",
        `store("${key}", value): the value is ${bytes} bytes of JSON, over the cap of ${maxStoreValueBytes} for one key (tools.codeMode.maxStoreValueBytes). Store less (the fields you need, or the data in several keys).`,
      );
    }
    await this.#write(scope, (values) => {
      const total = sizeOf(values, key) + utf8Bytes(key) + bytes;
      if (total > maxStoreBytes) {
        throw new CodeModeError(
          "output_limit_exceeded",
          `store("${key}", value): the conversation's stored values would be ${total} bytes, over the cap of ${maxStoreBytes} (tools.codeMode.maxStoreBytes). Delete keys you no longer need (store.delete(key)) or store less.`,
        );
      }
      values[key] = { json };
      return true;
    });
    return { value: null, bytes };
  }

  /** Deletes `key`; true when it was stored. */
  async delete(scope: CellStoreScope, key: string, what = "store.delete(key)"): Promise<CellStoreAnswer> {
    checkKey(key, what);
    let found = false;
    await this.#write(scope, (values) => {
      found = values[key] !== undefined;
      delete values[key];
      return found;
    });
    return { value: found, bytes: 0 };
  }

  /** Drops every value of a conversation (a session ended on a store that does not outlive the process). */
  async clear(scope: CellStoreScope): Promise<void> {
    await this.#write(scope, (values) => {
      const had = Object.keys(values).length > 0;
      for (const key of Object.keys(values)) delete values[key];
      return had;
    });
  }

  async #read(scope: CellStoreScope): Promise<ValuesRecord | null> {
    const store = await this.store;
    return store.getHostRecord<ValuesRecord>({
      kind: VALUES_KIND,
      owner: scope.owner,
      id: scope.conversation,
    });
  }

  /**
   * Changes the conversation's values under its lease, checks the principal's cap and writes both
   * records. `change` edits the live values in place and answers whether anything changed.
   */
  async #write(
    scope: CellStoreScope,
    change: (values: Record<string, { json: string }>) => boolean,
  ): Promise<void> {
    await this.#locked(VALUES_LOCK_KIND, scope.owner, scope.conversation, async (store) => {
      const key = { kind: VALUES_KIND, owner: scope.owner, id: scope.conversation };
      const now = this.clock();
      const record = await store.getHostRecord<ValuesRecord>(key);
      // Expired values are gone for a writer: it starts from nothing.
      const values = record !== null && record.expiresAt > now ? record.values : {};
      if (!change(values)) return;
      const bytes = sizeOf(values);
      const { storeTtlSeconds } = this.limits;
      const expiresAt = now + storeTtlSeconds * 1000;
      await this.#account(store, scope, bytes, expiresAt);
      if (bytes === 0) {
        await store.deleteHostRecord(key);
        return;
      }
      await store.putHostRecord(
        key,
        { expiresAt, bytes, values } satisfies ValuesRecord as unknown as JsonValue,
        Math.min(MAX_TTL_SECONDS, storeTtlSeconds + EXPIRED_MEMORY_SECONDS),
      );
    });
  }

  /** Records the conversation's new size in its principal's usage, refusing it past the principal's cap. */
  async #account(
    store: SnapshotStore,
    scope: CellStoreScope,
    bytes: number,
    expiresAt: number,
  ): Promise<void> {
    await this.#locked(USAGE_LOCK_KIND, scope.owner, USAGE_ID, async () => {
      const key = { kind: USAGE_KIND, owner: scope.owner, id: USAGE_ID };
      const now = this.clock();
      const usage = (await store.getHostRecord<UsageRecord>(key)) ?? { conversations: {} };
      let others = 0;
      let lastExpiry = expiresAt;
      const conversations: UsageRecord["conversations"] = {};
      for (const [conversation, entry] of Object.entries(usage.conversations)) {
        if (conversation === scope.conversation || entry.expiresAt <= now) continue;
        conversations[conversation] = entry;
        others += entry.bytes;
        lastExpiry = Math.max(lastExpiry, entry.expiresAt);
      }
      const cap = this.limits.maxStorePrincipalBytes;
      if (bytes > 0 && others + bytes > cap) {
        throw new CodeModeError(
          "output_limit_exceeded",
          `store(key, value): your stored values in all conversations would be ${others + bytes} bytes, over the cap of ${cap} per principal (tools.codeMode.maxStorePrincipalBytes). Delete keys you no longer need (store.delete(key)) or store less.`,
        );
      }
      if (bytes > 0) conversations[scope.conversation] = { bytes, expiresAt };
      if (Object.keys(conversations).length === 0) {
        await store.deleteHostRecord(key);
        return;
      }
      const ttlSeconds = Math.min(MAX_TTL_SECONDS, Math.max(1, Math.ceil((lastExpiry - now) / 1000)));
      await store.putHostRecord(key, { conversations } as unknown as JsonValue, ttlSeconds);
    });
  }

  /** Runs `work` holding the lease `kind/owner/id`: first in this process's queue, then in the store. */
  async #locked<T>(
    kind: string,
    owner: string,
    id: string,
    work: (store: SnapshotStore) => Promise<T>,
  ): Promise<T> {
    const queueKey = JSON.stringify([kind, owner, id]);
    const previous = this.#queues.get(queueKey) ?? Promise.resolve();
    const mine = previous.then(
      () => this.#leased(kind, owner, id, work),
      () => this.#leased(kind, owner, id, work),
    );
    const tail = mine.catch(() => {});
    this.#queues.set(queueKey, tail);
    void tail.then(() => {
      if (this.#queues.get(queueKey) === tail) this.#queues.delete(queueKey);
    });
    return mine;
  }

  async #leased<T>(
    kind: string,
    owner: string,
    id: string,
    work: (store: SnapshotStore) => Promise<T>,
  ): Promise<T> {
    const store = await this.store;
    const lease = { kind, owner, id };
    const holder = `${this.#holder}:${randomUUID()}`;
    const giveUpAt = Date.now() + LEASE_WAIT_MS;
    for (
      let pause = 5;
      !(await store.leaseHostRecord(lease, holder, LEASE_SECONDS));
      pause = Math.min(pause * 2, 200)
    ) {
      if (Date.now() >= giveUpAt) {
        throw new CodeModeError(
          "internal_error",
          "store(key, value): the conversation's stored values stayed busy with another write; try again.",
        );
      }
      await sleep(pause);
    }
    try {
      return await work(store);
    } finally {
      await store.releaseHostRecord(lease, holder).catch(() => {});
    }
  }
}

/** The bytes a conversation's values take: each key and its value's JSON, `except` one key. */
function sizeOf(values: Record<string, { json: string }>, except?: string): number {
  let bytes = 0;
  for (const [key, entry] of Object.entries(values)) {
    if (key !== except) bytes += utf8Bytes(key) + utf8Bytes(entry.json);
  }
  return bytes;
}
