// Delivering nested-call outcomes to a waiting run over Redis pub/sub, and noticing a call whose owning replica is gone.
import type { Redis } from "ioredis";
import type { OutcomeWatcher } from "./backend.js";
import type { ScriptClient } from "./redis-connection.js";
import type { ReplicaLease } from "./redis-lease.js";
import type { CallJson, RedisRecordCodec } from "./redis-record.js";

/** How soon a watch looks at a call's owner again after Redis did not answer. */
const RETRY_MS = 500;

/**
 * One subscriber connection shared by every watch of this replica, with each channel's listeners and
 * each open watch's re-read of its calls, run when the subscriber reconnects (messages sent meanwhile
 * are lost).
 */
export class OutcomeSubscriptions {
  readonly #client: ScriptClient;
  #subscriber: Redis | null = null;
  readonly #watchers = new Map<string, Set<(callId: string) => void>>();
  readonly resyncs = new Set<() => void>();

  constructor(client: ScriptClient) {
    this.#client = client;
  }

  async subscribe(channel: string, onMessage: (callId: string) => void): Promise<void> {
    if (this.#subscriber === null) {
      const subscriber = this.#client.duplicate();
      // A subscriber that loses Redis reconnects on its own and resyncs every watch (below); its error
      // event carries nothing a watch could act on, and unhandled it would crash the process.
      subscriber.on("error", () => {});
      let connectedBefore = false;
      subscriber.on("ready", () => {
        if (connectedBefore) for (const resync of this.resyncs) resync();
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

  async unsubscribe(channel: string, onMessage: (callId: string) => void): Promise<void> {
    const listeners = this.#watchers.get(channel);
    if (listeners === undefined) return;
    listeners.delete(onMessage);
    if (listeners.size > 0) return;
    this.#watchers.delete(channel);
    await this.#subscriber?.unsubscribe(channel);
  }

  /** Forgets every watch and drops the subscriber connection. */
  close(): void {
    this.#watchers.clear();
    this.resyncs.clear();
    this.#subscriber?.disconnect();
  }
}

/** What one watch needs of its backend. */
export type OutcomeWatchContext = {
  client: ScriptClient;
  codec: RedisRecordCodec;
  lease: ReplicaLease;
  subscriptions: OutcomeSubscriptions;
  replicaId: string;
  /** The run's hash key and its outcomes channel. */
  key: string;
  channel: string;
};

/**
 * Delivers the outcomes of the run's given calls: those recorded already, then each one as another
 * replica records it (Redis pub/sub, no polling). A call whose owning replica's lease has run out is
 * reported through `watcher.ownerGone` (checked when the lease would run out, not in a loop). Resolves
 * to the function that stops the watch.
 */
export async function watchOutcomes(
  context: OutcomeWatchContext,
  runId: string,
  callIds: readonly string[],
  watcher: OutcomeWatcher,
): Promise<() => Promise<void>> {
  const { client, codec, lease, subscriptions, replicaId, key, channel } = context;
  const pending = new Set(callIds);
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;

  const deliver = async (callId: string): Promise<boolean> => {
    const [outcomeJson = null, settledAt, mac] = await client.hmget(
      key,
      `r:${callId}`,
      `a:${callId}`,
      `m:${callId}`,
    );
    if (outcomeJson === null || stopped || !pending.has(callId)) return outcomeJson !== null;
    pending.delete(callId);
    if (codec.outcomeIntact(runId, callId, outcomeJson, settledAt ?? "", mac ?? undefined)) {
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
      const [owner = null, call = null] = await client.hmget(key, `o:${callId}`, `c:${callId}`);
      if (owner === null || call === null || owner === replicaId) return;
      const [state, ms] = await lease.ownerState(owner);
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
  // A read that fails here (Redis away) is made again by the resync when the subscriber reconnects,
  // and by the owner check's retry; the message handler has no caller to report to.
  const onMessage = (callId: string) => {
    if (pending.has(callId)) void deliver(callId).catch(() => {});
  };

  // A subscriber that reconnected missed what was published meanwhile: read the calls again (a read
  // that fails is made again at the next reconnect).
  const resync = () => {
    for (const callId of pending) void deliver(callId).catch(() => {});
  };
  await subscriptions.subscribe(channel, onMessage);
  subscriptions.resyncs.add(resync);
  // Subscribed first, then read: an outcome recorded in between is seen by one or the other.
  for (const callId of callIds) {
    if (!(await deliver(callId))) await checkOwner(callId);
  }
  return async () => {
    stopped = true;
    subscriptions.resyncs.delete(resync);
    for (const timer of timers) clearTimeout(timer);
    // Stopping a watch must not fail: a channel left subscribed after Redis went away is dropped with
    // the subscriber connection, and a message on it finds no listener.
    await subscriptions.unsubscribe(channel, onMessage).catch(() => {});
  };
}
