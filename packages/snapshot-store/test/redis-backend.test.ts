import { CodeModeError } from "@codecell/contract";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type RunningRedis,
  type RunningSentinel,
  redisSkipReason,
  startRedisSentinel,
  startRedisServer,
} from "../../../scripts/redis-server.mjs";
import { RedisSnapshotBackend, type RedisSnapshotBackendOptions } from "../src/redis-backend.js";
import { openSnapshotStore, type SnapshotStore } from "../src/snapshot-store.js";
import type { CallOutcome } from "../src/types.js";
import { scopeFor, suspendInput, TEST_SECRET } from "./support/fixtures.js";

// The contract suite covers the Redis backend like the others; these are what only a shared store has:
// several replicas on one server, integrity, Redis expiry, outcomes across processes, a Redis restart.
describe.skipIf(redisSkipReason !== null)("Redis backend: several replicas on one server", () => {
  let server: RunningRedis;
  let redis: Redis;
  let prefixes = 0;
  let prefix = "";
  const stores: SnapshotStore[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    redis = quietClient(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close().catch(() => {});
  });

  function nextPrefix(): string {
    prefixes += 1;
    prefix = `replicas-${prefixes}:`;
    return prefix;
  }

  async function replica(options: Partial<RedisSnapshotBackendOptions> = {}): Promise<SnapshotStore> {
    const store = await openSnapshotStore({
      backend: new RedisSnapshotBackend({
        url: server.url,
        secret: TEST_SECRET,
        keyPrefix: prefix,
        ...options,
      }),
      sweepIntervalMs: 0,
    });
    stores.push(store);
    return store;
  }

  async function thrown(action: () => Promise<unknown>): Promise<CodeModeError> {
    try {
      await action();
    } catch (error) {
      if (CodeModeError.is(error)) return error;
      throw error;
    }
    throw new Error("expected a CodeModeError");
  }

  it("lets exactly one of two replicas claim a run when both claim it at once, run after run", async () => {
    nextPrefix();
    const a = await replica();
    const b = await replica();
    for (let round = 0; round < 25; round += 1) {
      const { runId } = await a.suspend(suspendInput());
      const results = await Promise.allSettled([a.claim(runId, scopeFor()), b.claim(runId, scopeFor())]);
      const winners = results.filter((result) => result.status === "fulfilled");
      expect(winners).toHaveLength(1);
      const loser = results.find((result) => result.status === "rejected") as PromiseRejectedResult;
      expect(loser.reason.message).toContain("already being resumed");
      const claim = (winners[0] as PromiseFulfilledResult<Awaited<ReturnType<SnapshotStore["claim"]>>>).value;
      await (winners[0] === results[0] ? a : b).finish(claim, "completed");
    }
  });

  it("hands a run suspended on one replica to another, with outcomes recorded by a third", async () => {
    nextPrefix();
    const [a, b, c] = [await replica(), await replica(), await replica()];
    const { runId } = await a.suspend(suspendInput());
    expect(await c.settleCall(runId, "call-1", { ok: true, value: { from: "c" } })).toBe("recorded");
    const claim = await b.claim(runId, scopeFor());
    expect(claim.pendingCalls[0]?.outcome).toEqual({ ok: true, value: { from: "c" } });
    expect(Buffer.from(claim.snapshot).equals(Buffer.from(suspendInput().snapshot))).toBe(true);
    await b.finish(claim, "completed");
    await expect(a.claim(runId, scopeFor())).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("counts maxLiveRuns per live replica: the deployment's cap grows and shrinks with its replicas", async () => {
    nextPrefix();
    const open = async () => {
      const store = await openSnapshotStore({
        backend: new RedisSnapshotBackend({ url: server.url, secret: TEST_SECRET, keyPrefix: prefix }),
        sweepIntervalMs: 0,
        maxLiveRuns: 2,
        maxLiveRunsPerPrincipal: 2,
      });
      stores.push(store);
      return store;
    };
    const a = await open();
    for (let index = 0; index < 2; index += 1) await a.suspend(suspendInput());
    const full = await thrown(() => a.suspend(suspendInput()));
    expect(full.code).toBe("snapshot_limit_exceeded");
    expect(full.message).toContain("the limit is 2 (maxLiveRuns 2 per live replica)");
    // Two more replicas: room for four more runs, taken from any of them.
    const [b, c] = [await open(), await open()];
    for (const store of [a, b, c, a]) await store.suspend(suspendInput());
    expect((await thrown(() => b.suspend(suspendInput()))).message).toContain("the limit is 6");
    // A replica that stops takes its share with it; the runs stay (never evicted).
    await c.close();
    expect((await a.stats()).live).toBe(6);
    expect((await thrown(() => a.suspend(suspendInput()))).message).toContain("the limit is 4");
  });

  it("gives back a claim that timed out here but ran on a stalled server, so the run is not held", async () => {
    nextPrefix();
    const a = await replica({ commandTimeoutMs: 300 });
    const b = await replica();
    const { runId } = await a.suspend(suspendInput());
    // Redis stalls for 2 s; the claim goes out well after the stall began (Redis runs commands in the
    // order it reads them, and a loaded machine may read late), and still times out inside it.
    const stall = redis.call("DEBUG", "SLEEP", "2");
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await thrown(() => a.claim(runId, scopeFor()))).code).toBe("runtime_unavailable");
    await stall;
    // Bounded: given back within a few seconds of the stall's end.
    let claimed: Awaited<ReturnType<SnapshotStore["claim"]>> | null = null;
    for (let attempt = 0; attempt < 100 && claimed === null; attempt += 1) {
      claimed = await b.claim(runId, scopeFor()).catch((error: CodeModeError) => {
        expect(error.message).toContain("already being resumed");
        return null;
      });
      if (claimed === null) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(claimed?.runId).toBe(runId);
  });

  it("requires a secret of at least 32 bytes", () => {
    for (const secret of [undefined, "", "short secret"]) {
      expect(() => new RedisSnapshotBackend({ url: server.url, secret: secret as string })).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    }
    expect(() => new RedisSnapshotBackend({ url: "http://localhost", secret: TEST_SECRET })).toThrow(
      expect.objectContaining({ code: "invalid_config" }),
    );
  });

  it("never restores a record changed in Redis or written with another secret", async () => {
    nextPrefix();
    const a = await replica();
    const tampered = await a.suspend(suspendInput());
    await redis.hset(`${prefix}run:${tampered.runId}`, "snap", Buffer.from("evil snapshot"));
    const error = await thrown(() => a.claim(tampered.runId, scopeFor()));
    expect(error.code).toBe("snapshot_restore_failed");
    expect(error.message).toContain("integrity check");
    // The run is ended, not left to be tried again.
    expect((await thrown(() => a.claim(tampered.runId, scopeFor()))).message).toContain("already failed");

    const forgedOutcome = await a.suspend(suspendInput());
    await redis.hset(`${prefix}run:${forgedOutcome.runId}`, "r:call-1", '{"ok":true,"value":"forged"}');
    expect((await thrown(() => a.claim(forgedOutcome.runId, scopeFor()))).code).toBe(
      "snapshot_restore_failed",
    );

    const other = await replica({ secret: `${TEST_SECRET}-but-another-one` });
    const { runId } = await a.suspend(suspendInput());
    expect((await thrown(() => other.claim(runId, scopeFor()))).code).toBe("snapshot_restore_failed");
  });

  it("refuses a run's signed record copied over another run's key", async () => {
    nextPrefix();
    const a = await replica();
    const first = await a.suspend(suspendInput());
    const second = await a.suspend(suspendInput());
    const source = await redis.hgetallBuffer(`${prefix}run:${first.runId}`);
    await redis.hset(`${prefix}run:${second.runId}`, source);
    expect((await thrown(() => a.claim(second.runId, scopeFor()))).code).toBe("snapshot_restore_failed");
    expect((await a.claim(first.runId, scopeFor())).runId).toBe(first.runId);
  });

  it("signs host records and leases: one changed, forged or copied under another key in Redis is refused", async () => {
    nextPrefix();
    const a = await replica();
    const transcript = { kind: "agent-conversation", owner: "alice", id: "c-1" };
    const lease = { kind: "agent-conversation-taken", owner: "alice", id: "c-1" };
    const redisKey = (key: { kind: string; owner: string; id: string }) =>
      `${prefix}host:${[key.kind, key.owner, key.id].map(encodeURIComponent).join("/")}`;
    const refused = async (action: () => Promise<unknown>) => {
      const error = await thrown(action);
      expect(error.code).toBe("snapshot_restore_failed");
      expect(error.message).toMatch(/record was refused: it failed the snapshot store's integrity check/);
    };
    await a.putHostRecord(transcript, { turns: [1, 2] }, 600);
    await a.putHostRecord({ ...transcript, owner: "bob" }, { turns: ["bob"] }, 600);
    await a.putHostRecord({ ...transcript, kind: "agent-response" }, { turns: ["response"] }, 600);
    expect(await a.getHostRecord(transcript)).toEqual({ turns: [1, 2] });
    // Another replica with the same secret reads it.
    expect(await (await replica()).getHostRecord(transcript)).toEqual({ turns: [1, 2] });

    const original = (await redis.get(redisKey(transcript)))!;
    await redis.set(redisKey(transcript), original.replace("[1,2]", '[1,2,"injected"]'));
    await refused(() => a.getHostRecord(transcript));
    await redis.set(redisKey(transcript), '{"turns":[9]}');
    await refused(() => a.getHostRecord(transcript));
    for (const from of [
      { ...transcript, owner: "bob" },
      { ...transcript, kind: "agent-response" },
    ]) {
      await redis.set(redisKey(transcript), (await redis.get(redisKey(from)))!);
      await refused(() => a.getHostRecord(transcript));
    }
    const other = await replica({ secret: `${TEST_SECRET}-but-another-one` });
    await redis.set(redisKey(transcript), original);
    expect(await a.getHostRecord(transcript)).toEqual({ turns: [1, 2] });
    await refused(() => other.getHostRecord(transcript));

    // Leases: a forged one and one copied from another conversation are refused, not obeyed.
    expect(await a.leaseHostRecord({ ...lease, id: "c-2" }, "holder-x", 600)).toBe(true);
    await redis.set(redisKey(lease), "intruder", "PX", 600_000);
    await refused(() => a.leaseHostRecord(lease, "holder-a", 600));
    await redis.set(redisKey(lease), (await redis.get(redisKey({ ...lease, id: "c-2" })))!, "PX", 600_000);
    await refused(() => a.leaseHostRecord(lease, "holder-a", 600));
    await redis.del(redisKey(lease));
    expect(await a.leaseHostRecord(lease, "holder-a", 600)).toBe(true);
    expect(await a.leaseHostRecord(lease, "holder-b", 600)).toBe(false);
    expect(await a.releaseHostRecord(lease, "holder-a")).toBe(true);
  });

  it("gives every record a Redis expiry: TTL plus tombstone time while live, the tombstone time after", async () => {
    nextPrefix();
    const store = await openSnapshotStore({
      backend: new RedisSnapshotBackend({ url: server.url, secret: TEST_SECRET, keyPrefix: prefix }),
      sweepIntervalMs: 0,
      tombstoneSeconds: 120,
    });
    stores.push(store);
    const { runId } = await store.suspend(suspendInput({ ttlSeconds: 60 }));
    const live = await redis.pttl(`${prefix}run:${runId}`);
    expect(live).toBeGreaterThan(170_000);
    expect(live).toBeLessThanOrEqual(180_000);
    await store.finish(await store.claim(runId, scopeFor()), "completed");
    const tombstone = await redis.pttl(`${prefix}run:${runId}`);
    expect(tombstone).toBeGreaterThan(170_000);
    expect(tombstone).toBeLessThanOrEqual(180_000);
    expect(await redis.hexists(`${prefix}run:${runId}`, "snap")).toBe(0);
  });

  it("delivers an outcome recorded on another replica to a watching replica at once", async () => {
    nextPrefix();
    const a = await replica();
    const b = await replica();
    const { runId } = await a.suspend(suspendInput());
    const seen: Array<[string, CallOutcome]> = [];
    const arrived = new Promise<void>((resolve) => {
      void b
        .watchOutcomes(runId, ["call-1", "call-2"], (callId, outcome) => {
          seen.push([callId, outcome]);
          if (seen.length === 2) resolve();
        })
        .then((stop) => stops.push(stop!));
    });
    const stops: Array<() => Promise<void>> = [];
    await a.settleCall(runId, "call-1", { ok: true, value: 1 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await a.settleCall(runId, "call-2", { ok: false, error: { name: "Error", message: "no" } });
    await arrived;
    expect(seen).toEqual([
      ["call-1", { ok: true, value: 1 }],
      ["call-2", { ok: false, error: { name: "Error", message: "no" } }],
    ]);
    for (const stop of stops) await stop();
  });

  it("settles the calls of a replica whose lease is gone as interrupted, and those of a live one not", async () => {
    nextPrefix();
    const a = await replica({ replicaLeaseMs: 600 });
    const b = await replica({ replicaLeaseMs: 600 });
    const { runId } = await a.suspend(suspendInput());
    // A replica that is alive keeps its calls: nothing arrives while its lease is renewed.
    const early: string[] = [];
    const stopEarly = await b.watchOutcomes(runId, ["call-1"], (callId) => early.push(callId));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(early).toEqual([]);
    await stopEarly?.();

    const outcome = new Promise<CallOutcome>((resolve) => {
      void b.watchOutcomes(runId, ["call-1"], (_callId, settled) => resolve(settled));
    });
    await a.close(); // its lease goes with it
    const settled = await outcome;
    expect(settled).toMatchObject({ ok: false, error: { code: "nested_tool_failed" } });
    expect((settled as { error: { message: string } }).error.message).toContain("interrupted");
    const claim = await b.claim(runId, scopeFor());
    expect(claim.pendingCalls[0]?.outcome).toEqual(settled);
  });

  it("keeps a live replica's calls when Redis lost its lease (a restart from a persisted dataset)", async () => {
    nextPrefix();
    const a = await replica({ replicaLeaseMs: 600 });
    const b = await replica({ replicaLeaseMs: 600 });
    const { runId } = await a.suspend(suspendInput());
    // What a Redis restarted from an RDB/AOF file looks like to a wait: the run is there, the lease of
    // the replica running its call is not (it expired while Redis was down).
    const leases = await redis.keys(`${prefix}replica:*`);
    expect(leases).toHaveLength(2);
    await redis.del(...leases);
    const seen: Array<[string, CallOutcome]> = [];
    const stop = await b.watchOutcomes(runId, ["call-1"], (callId, outcome) => seen.push([callId, outcome]));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(seen).toEqual([]);
    // A renewed its lease; its call settles normally and that outcome is the one delivered.
    expect(await redis.keys(`${prefix}replica:*`)).toHaveLength(2);
    await a.settleCall(runId, "call-1", { ok: true, value: "done on A" });
    for (let attempt = 0; attempt < 100 && seen.length === 0; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen).toEqual([["call-1", { ok: true, value: "done on A" }]]);
    await stop?.();
  });

  it("renews its lease as soon as its connection to a restarted Redis is back", async () => {
    nextPrefix();
    // A long lease: only the reconnection, not the periodic renewal, can bring it back in time.
    const store = await replica({ replicaLeaseMs: 60_000, commandTimeoutMs: 1_000 });
    expect(await redis.keys(`${prefix}replica:*`)).toHaveLength(1);
    await server.restart();
    redis.disconnect();
    redis = quietClient(server.url);
    let leases: string[] = [];
    // Bounded: the client reconnects within a few hundred milliseconds.
    for (let attempt = 0; attempt < 50 && leases.length === 0; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      leases = await redis.keys(`${prefix}replica:*`);
    }
    expect(leases).toHaveLength(1);
    await store.stats(); // still serving
  });

  it("answers runtime_unavailable while Redis is down and snapshot_restore_failed after it lost its data", async () => {
    nextPrefix();
    const store = await replica({ commandTimeoutMs: 1_000 });
    const { runId } = await store.suspend(suspendInput());
    await server.halt();
    const down = await thrown(() => store.claim(runId, scopeFor()));
    expect(down.code).toBe("runtime_unavailable");
    expect(down.message).toContain("is unavailable");
    await server.restart();
    // Bounded: the client reconnects within a few hundred milliseconds.
    let lost: CodeModeError | undefined;
    for (let attempt = 0; attempt < 40; attempt += 1) {
      lost = await thrown(() => store.claim(runId, scopeFor()));
      if (lost.code !== "runtime_unavailable") break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(lost?.code).toBe("snapshot_restore_failed");
    expect(lost?.message).toContain("lost its records");
    // Once said, the store works again on the new dataset: new runs resume, and a run missing from it is
    // still said to be lost (on a replica that never saw the reset too), not "unknown".
    const fresh = await store.suspend(suspendInput());
    await store.finish(await store.claim(fresh.runId, scopeFor()), "completed");
    const other = await replica();
    for (const asked of [store, other]) {
      const again = await thrown(() => asked.claim(runId, scopeFor()));
      expect(again.code).toBe("snapshot_restore_failed");
      expect(again.message).toContain("lost its records at");
    }
    // Another caller's live run gets exactly that answer too: whether a run exists stays unknowable.
    const theirs = await store.suspend(suspendInput());
    const foreign = await thrown(() => other.claim(theirs.runId, scopeFor({ sessionId: "session-2" })));
    const missing = await thrown(() => other.claim(runId, scopeFor({ sessionId: "session-2" })));
    expect(foreign.code).toBe(missing.code);
    expect(foreign.message.replace(theirs.runId, "")).toBe(missing.message.replace(runId, ""));
    redis.disconnect();
    redis = quietClient(server.url);
  });
});

describe("Redis backend: where the server is", () => {
  it("takes exactly one of url and sentinels, and a master name with sentinels", () => {
    const cases: Array<[Partial<RedisSnapshotBackendOptions>, string]> = [
      [{}, "give url"],
      [
        { url: "redis://127.0.0.1:6379", sentinels: [{ host: "127.0.0.1", port: 26379 }], name: "m" },
        "not both",
      ],
      [{ sentinels: [{ host: "127.0.0.1", port: 26379 }] }, "name (the master group name"],
      [{ sentinels: [], name: "m" }, "non-empty array of { host, port }"],
      [{ sentinels: [{ host: "127.0.0.1", port: 0 }], name: "m" }, "non-empty array of { host, port }"],
      [{ sentinels: [{ host: "127.0.0.1", port: 26379 }], name: "m", db: -1 }, "db must be"],
    ];
    for (const [options, message] of cases) {
      expect(() => new RedisSnapshotBackend({ secret: TEST_SECRET, ...options })).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringContaining(message) }),
      );
    }
    const backend = new RedisSnapshotBackend({
      secret: TEST_SECRET,
      sentinels: [{ host: "10.0.0.5", port: 26379 }],
      name: "codecell",
      password: "pw",
    });
    expect(backend.where).toBe('sentinel master "codecell" via 10.0.0.5:26379');
  });
});

// A master, one replica and a sentinel (quorum 1): what a store on a Sentinel deployment keeps when the
// master dies and the replica is promoted.
describe.skipIf(redisSkipReason !== null)("Redis backend: a Sentinel failover", () => {
  let master: RunningRedis;
  let replicaServer: RunningRedis;
  let sentinel: RunningSentinel;

  beforeAll(async () => {
    master = await startRedisServer();
    replicaServer = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(master.port)] });
    // Bounded: the replica syncs within a second or so.
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if ((await quietInfo(replicaServer.url)).includes("master_link_status:up")) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    sentinel = await startRedisSentinel({
      masterPort: master.port,
      name: "cc",
      downAfterMs: 500,
      failoverTimeoutMs: 2000,
    });
    for (let attempt = 0; attempt < 100 && !sentinel.log().includes("+slave"); attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  afterAll(async () => {
    await sentinel?.stop();
    await replicaServer?.stop();
    await master?.stop();
  });

  it("resumes a run that reached the replica after the master is killed and the replica promoted", async () => {
    const store = await openSnapshotStore({
      backend: new RedisSnapshotBackend({
        sentinels: [{ host: "127.0.0.1", port: sentinel.port }],
        name: "cc",
        secret: TEST_SECRET,
        keyPrefix: "sentinel:",
        commandTimeoutMs: 1_000,
      }),
      sweepIntervalMs: 0,
    });
    try {
      const { runId } = await store.suspend(suspendInput());
      const direct = quietClient(master.url);
      expect(await direct.call("WAIT", "1", "2000")).toBe(1);
      direct.disconnect();
      await master.halt();
      // Bounded: the sentinel sees the master down after 500 ms and promotes the replica in a second or two.
      let claim: Awaited<ReturnType<SnapshotStore["claim"]>> | null = null;
      let unavailable = 0;
      for (let attempt = 0; attempt < 100 && claim === null; attempt += 1) {
        claim = await store.claim(runId, scopeFor()).catch((error: CodeModeError) => {
          expect(error.code).toBe("runtime_unavailable");
          unavailable += 1;
          return null;
        });
        if (claim === null) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(unavailable).toBeGreaterThan(0);
      expect(await sentinel.masterPort()).toBe(replicaServer.port);
      expect(Buffer.from(claim!.snapshot).equals(Buffer.from(suspendInput().snapshot))).toBe(true);
      await store.finish(claim!, "completed");
      await expect(store.claim(runId, scopeFor())).rejects.toMatchObject({ code: "invalid_input" });
    } finally {
      await store.close();
    }
  });
});

async function quietInfo(url: string): Promise<string> {
  const client = quietClient(url);
  try {
    return await client.info("replication");
  } finally {
    client.disconnect();
  }
}

/** A client for looking into Redis; its reconnect errors during the restart test are expected. */
function quietClient(url: string): Redis {
  const client = new Redis(url);
  client.on("error", () => {});
  return client;
}
