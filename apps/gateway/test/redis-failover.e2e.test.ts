// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type RunningRedis,
  type RunningSentinel,
  redisSkipReason,
  startRedisSentinel,
  startRedisServer,
} from "../../../scripts/redis-server.mjs";
import { baseConfig, type Connected, callCodeMode, type HttpGateway, makeSetup } from "./harness.js";
import { ReplicaFleet } from "./support/replicas.js";

const TOKEN = "redis-failover-token-0123456789";
const SECRET = "redis-failover-integrity-secret-0123456789abcdef";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "chat-failover" };
const MASTER_NAME = "codecell";
const RUNS = 5;

type Result = Awaited<ReturnType<typeof callCodeMode>>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (redisSkipReason) console.warn(redisSkipReason);

// Two replica processes (`codecell serve --http`, the built CLI) on a Sentinel deployment of real
// redis-server processes: a master, one replica and one sentinel (quorum 1). The master is SIGKILLed
// and the sentinel promotes the replica; runs that reached the replica before must all resume, once.
describe.skipIf(redisSkipReason !== null)("replicas through a Redis Sentinel failover", () => {
  let master: RunningRedis;
  let standby: RunningRedis;
  let sentinel: RunningSentinel;
  const fleet = new ReplicaFleet(HEADERS);
  const gateways = fleet.gateways;

  beforeAll(async () => {
    master = await startRedisServer();
    standby = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(master.port)] });
    // Bounded: the replica's first sync takes well under a second.
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if ((await master.command("WAIT", "1", "100")) === ":1") break;
    }
    sentinel = await startRedisSentinel({
      masterPort: master.port,
      name: MASTER_NAME,
      downAfterMs: 1000,
      failoverTimeoutMs: 3000,
    });
    // The sentinel learns of the replica from the master's INFO: a failover needs it known.
    for (let attempt = 0; attempt < 200 && !sentinel.log().includes("+slave"); attempt += 1) await sleep(25);
    expect(sentinel.log()).toContain("+slave");
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 1000 } },
        plugins: [],
        http: { tokens: [{ name: "alice", token: TOKEN }] },
        snapshotStore: {
          kind: "redis",
          sentinels: [{ host: "127.0.0.1", port: sentinel.port }],
          name: MASTER_NAME,
          secret: "${CODECELL_SNAPSHOT_SECRET}",
          keyPrefix: "failover:",
          replicaLeaseMs: 1200,
        },
      }),
    );
    await Promise.all(
      [0, 1].map(() =>
        fleet.start(setup.configPath, {
          env: { CODECELL_SNAPSHOT_SECRET: SECRET },
          detached: true,
          warm: false,
        }),
      ),
    );
  });
  afterEach(() => fleet.closeClients());
  afterAll(async () => {
    await fleet.stopAll();
    await sentinel?.stop();
    await standby?.stop();
    await master?.stop();
  });

  const client = (gateway: HttpGateway): Promise<Connected> => fleet.client(gateway);

  /** Repeats `action` while it answers runtime_unavailable (the failover under way), at most 60 times. */
  async function onceRedisAnswers(
    action: () => Promise<Result>,
  ): Promise<{ result: Result; refused: Result[] }> {
    const refused: Result[] = [];
    let result = await action();
    for (let attempt = 0; attempt < 60 && result.code === "runtime_unavailable"; attempt += 1) {
      refused.push(result);
      await sleep(250);
      result = await action();
    }
    return { result, refused };
  }

  it("resumes every run that reached the replica, once each, after the master is killed and the replica promoted", async () => {
    const [onA, onB] = [await client(gateways[0]!), await client(gateways[1]!)];
    const runs: string[] = [];
    for (let index = 0; index < RUNS; index += 1) {
      const waiting = await onceRedisAnswers(() =>
        callCodeMode(onA.client, "exec", { code: `await yield_control("r"); return ${index};` }),
      );
      expect(waiting.result.status, `${waiting.result.code}: ${waiting.result.error}`).toBe("waiting");
      runs.push(waiting.result.runId!);
    }
    // Acknowledged by the replica too: replication is asynchronous, and only what reached it survives.
    expect(await master.command("WAIT", "1", "2000")).toBe(":1");
    await master.halt();

    // While the sentinel has not promoted the replica yet: a clear error naming the store, not a hang.
    const during = await callCodeMode(onB.client, "wait", { runId: runs[0]! });
    expect(during, `${during.code}: ${during.error}`).toMatchObject({
      status: "failed",
      code: "runtime_unavailable",
    });
    expect(during.error).toContain("snapshot store (Redis at sentinel master");
    expect(during.error).toContain("Try the call again in a moment");

    for (const [index, runId] of runs.entries()) {
      const { result, refused } = await onceRedisAnswers(() => callCodeMode(onB.client, "wait", { runId }));
      for (const answer of refused) expect(answer.error).toContain("is unavailable");
      expect(result, `${result.code}: ${result.error}`).toMatchObject({ status: "completed", value: index });
    }
    expect(await sentinel.masterPort()).toBe(standby.port);
    // None resumes twice, on either replica.
    for (const runId of runs) {
      for (const on of [onA, onB]) {
        const again = await callCodeMode(on.client, "wait", { runId });
        expect(again, `${again.code}: ${again.error}`).toMatchObject({
          status: "failed",
          code: "invalid_input",
        });
        expect(again.error).toMatch(/already completed/);
      }
    }
    // Both replicas serve again on the promoted master without a restart: a run suspended on A resumes on B.
    const fresh = await onceRedisAnswers(() =>
      callCodeMode(onA.client, "exec", { code: `await yield_control("after"); return "after";` }),
    );
    expect(fresh.result.status, `${fresh.result.code}: ${fresh.result.error}`).toBe("waiting");
    const done = await callCodeMode(onB.client, "wait", { runId: fresh.result.runId! });
    expect(done, `${done.code}: ${done.error}`).toMatchObject({ status: "completed", value: "after" });
  });
});
