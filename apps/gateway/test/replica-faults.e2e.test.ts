// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import { APP_DIR, baseConfig, type Connected, callCodeMode, type HttpGateway, makeSetup } from "./harness.js";
import { ReplicaFleet, redisSnapshotStore } from "./support/replicas.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

const TOKEN = "replica-fault-token-0123456789";
const SECRET = "replica-fault-integrity-secret-0123456789abcdef";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "chat-faults" };
const SLOW_SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");
/** Short, so each fault is seen in seconds; the bound on an interrupted call is a few of these. */
const LEASE_MS = 1200;
/** How long one exec or wait segment lasts before it answers `waiting`. */
const SEGMENT_MS = 1000;

type Result = Awaited<ReturnType<typeof callCodeMode>>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (redisSkipReason) console.warn(redisSkipReason);

/** A cell whose nested call to the slow downstream server ends in its value, or in the error's code and message. */
function slowCall(seconds: number, calls = 1): string {
  return `
    const one = async () => {
      try { return { text: (await MCP.slow.waitLong({ seconds: ${seconds} })).content[0].text }; }
      catch (error) { return { code: error.code ?? null, message: String(error.message) }; }
    };
    return await Promise.all(Array.from({ length: ${calls} }, one));`;
}

// Replica processes (`codecell serve --http`, the built CLI) on a real redis-server, each with a real
// stdio MCP server whose tool takes seconds, and one replica at a time dying in the ways a replica dies.
describe.skipIf(redisSkipReason !== null)("replicas under faults", () => {
  let redis: RunningRedis;
  let setup: ReturnType<typeof makeSetup>;
  const fleet = new ReplicaFleet(HEADERS);
  let b: HttpGateway;
  let c: HttpGateway;

  const callLog = () => {
    const file = join(setup.dir, "calls.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  };

  beforeAll(async () => {
    // An append-only file fsynced on every write: a SIGKILLed Redis comes back with all it acknowledged.
    redis = await startRedisServer({ persistence: "aof" });
    setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: SEGMENT_MS } },
        plugins: [],
        mcpServers: {
          slow: {
            command: process.execPath,
            args: [SLOW_SERVER],
            env: { CALL_LOG: "${CODECELL_CONFIG_DIR}/calls.log" },
          },
        },
        http: { tokens: [{ name: "alice", token: TOKEN }] },
        snapshotStore: redisSnapshotStore("faults:", { replicaLeaseMs: LEASE_MS }),
      }),
    );
    [b, c] = await Promise.all([replica(), replica()]);
  });
  afterEach(() => fleet.closeClients());
  afterAll(async () => {
    await fleet.stopAll();
    await redis?.stop();
  });

  /** A started, warmed replica in its own process group (to kill it with its downstream server). */
  const replica = (redisUrl = redis.url, configPath = setup.configPath) =>
    fleet.start(configPath, {
      env: { REDIS_URL: redisUrl, CODECELL_SNAPSHOT_SECRET: SECRET },
      detached: true,
    });
  const client = (gateway: HttpGateway) => fleet.client(gateway);

  /** Kills the replica and everything in its process group (its downstream servers too). */
  async function killGroup(gateway: HttpGateway): Promise<void> {
    process.kill(-gateway.child.pid!, "SIGKILL");
    await gateway.stop();
  }

  /**
   * Waits on `on` until the run is no longer waiting, at most `maxWaits` times (each wait lasts one
   * segment), so a call that is never settled fails the test instead of hanging it.
   */
  async function waitUntilDone(on: Connected, runId: string, maxWaits: number): Promise<Result> {
    let result = await callCodeMode(on.client, "wait", { runId });
    for (let attempt = 1; attempt < maxWaits && result.status === "waiting"; attempt += 1) {
      result = await callCodeMode(on.client, "wait", { runId });
    }
    return result;
  }

  /** Waits owed to a dead replica's call: its lease runs out, then one more lease, plus a segment of slack. */
  const WAITS_TO_INTERRUPT = Math.ceil((3 * LEASE_MS) / SEGMENT_MS) + 2;

  async function execWaiting(on: Connected, code: string): Promise<string> {
    const waiting = await callCodeMode(on.client, "exec", { code });
    expect(waiting, `${waiting.code}: ${waiting.error}`).toMatchObject({
      status: "waiting",
      reason: "pending_tools",
    });
    return waiting.runId!;
  }

  /** Waits until the run's calls are settled (the run yields or ends); at most `maxWaits` waits. */
  async function waitWhileCallsRun(on: Connected, runId: string, maxWaits: number): Promise<Result> {
    let result = await callCodeMode(on.client, "wait", { runId });
    for (let attempt = 1; attempt < maxWaits && result.reason === "pending_tools"; attempt += 1) {
      result = await callCodeMode(on.client, "wait", { runId });
    }
    return result;
  }

  /** Repeats `action` while it answers runtime_unavailable (Redis coming back), at most 40 times. */
  async function onceRedisAnswers(action: () => Promise<Result>): Promise<Result> {
    let result = await action();
    for (let attempt = 0; attempt < 40 && result.code === "runtime_unavailable"; attempt += 1) {
      await sleep(250);
      result = await action();
    }
    return result;
  }

  /** The replica's event loop runs again (it answers HTTP). */
  async function answering(gateway: HttpGateway): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if ((await fetch(`${gateway.url}healthz`).catch(() => null))?.ok) return;
      await sleep(100);
    }
    throw new Error("the replica does not answer");
  }

  /** A cell that makes one slow call, keeps how it ended, yields (so the run outlives the call), then returns it. */
  function callThenYield(seconds: number): string {
    return `
      let ended;
      try { ended = { text: (await MCP.slow.waitLong({ seconds: ${seconds} })).content[0].text }; }
      catch (error) { ended = { code: error.code ?? null, message: String(error.message) }; }
      await yield_control("the call ended");
      return ended;`;
  }

  function expectFinishedOnce(result: Result): void {
    expect(result, `${result.code}: ${result.error}`).toMatchObject({
      status: "failed",
      code: "invalid_input",
    });
    expect(result.error).toMatch(/already (completed|failed)/);
  }

  function expectInterrupted(result: Result, calls = 1): void {
    expect(result, `${result.code}: ${result.error}`).toMatchObject({ status: "completed" });
    const values = result.value as Array<{ code: string; message: string }>;
    expect(values).toHaveLength(calls);
    for (const value of values) {
      expect(value.code).toBe("nested_tool_failed");
      expect(value.message).toContain("interrupted");
    }
  }

  it("settles a SIGKILLed replica's calls as interrupted, with the wait before and after its lease ran out", async () => {
    const doomed = await replica();
    const onDoomed = await client(doomed);
    const [onB, onC] = [await client(b), await client(c)];
    // Several runs, one with several calls, all running downstream when the replica dies.
    const early = await execWaiting(onDoomed, slowCall(30));
    const late = await execWaiting(onDoomed, slowCall(30, 3));
    await killGroup(doomed);
    // A wait that is already waiting when the lease runs out, served by the same replica each time
    // (each wait claims the run again).
    expectInterrupted(await waitUntilDone(onB, early, WAITS_TO_INTERRUPT));
    // A wait that comes after the lease ran out (the early run's interruption above needed it gone),
    // on a replica that never saw the run: interrupted at once, no lease waited for again.
    expectInterrupted(await waitUntilDone(onC, late, 2), 3);
  });

  it("settles the call of a dead replica whose lease is five times a wait, with a wait every second", async () => {
    // The one longer lease: each wait ends long before the lease does, as with the default 15 s lease
    // and a client that waits again every second.
    const longLease = 5 * SEGMENT_MS;
    const { configPath } = makeSetup(
      baseConfig({
        ...JSON.parse(readFileSync(setup.configPath, "utf8")),
        snapshotStore: redisSnapshotStore("faults-long-lease:", { replicaLeaseMs: longLease }),
      }),
    );
    const [doomed, waiter] = await Promise.all([
      replica(redis.url, configPath),
      replica(redis.url, configPath),
    ]);
    const [onDoomed, onWaiter] = [await client(doomed), await client(waiter)];
    const runId = await execWaiting(onDoomed, slowCall(60));
    await killGroup(doomed);
    expectInterrupted(await waitUntilDone(onWaiter, runId, Math.ceil((3 * longLease) / SEGMENT_MS) + 2));
  });

  it("settles a frozen replica's call as interrupted, and the replica that thaws neither settles it again nor loses its lease", async () => {
    const frozen = await replica();
    const [onFrozen, onB] = [await client(frozen), await client(b)];
    const runId = await execWaiting(onFrozen, callThenYield(2));
    frozen.child.kill("SIGSTOP");
    // Its downstream server is not frozen: the call finishes there, but the frozen replica cannot record it.
    const yielded = await waitWhileCallsRun(onB, runId, WAITS_TO_INTERRUPT);
    expect(yielded, `${yielded.code}: ${yielded.error}`).toMatchObject({
      status: "waiting",
      reason: "yield",
    });
    frozen.child.kill("SIGCONT");
    await answering(frozen);
    expect(callLog()).toContain("finished");
    // The thawed replica's late outcome lost to the interruption: the run ends with what the cell saw.
    const done = await callCodeMode(onB.client, "wait", { runId });
    expect(done, `${done.code}: ${done.error}`).toMatchObject({ status: "completed" });
    expect(done.value).toMatchObject({ code: "nested_tool_failed" });
    expectFinishedOnce(await callCodeMode(onB.client, "wait", { runId }));
    // Thawed, it renews its lease again: a call it runs now is delivered, not taken for interrupted.
    const next = await execWaiting(onFrozen, slowCall(1.5));
    const result = await waitUntilDone(onB, next, 6);
    expect(result, `${result.code}: ${result.error}`).toMatchObject({
      status: "completed",
      value: [{ text: "finished" }],
    });
  });

  it("settles the calls of a replica cut off from Redis as interrupted, answers it runtime_unavailable meanwhile, and takes it back once healed", async () => {
    const proxy: TcpProxy = await startTcpProxy(redis.port);
    try {
      const cut = await replica(`redis://127.0.0.1:${proxy.port}`);
      const [onCut, onB] = [await client(cut), await client(b)];
      const runId = await execWaiting(onCut, callThenYield(2));
      proxy.cut();
      const yielded = await waitWhileCallsRun(onB, runId, WAITS_TO_INTERRUPT);
      expect(yielded, `${yielded.code}: ${yielded.error}`).toMatchObject({
        status: "waiting",
        reason: "yield",
      });
      // The cut-off replica cannot suspend a run: a clear error naming Redis, not a hang.
      const refused = await callCodeMode(onCut.client, "exec", {
        code: `await yield_control("x"); return 1;`,
      });
      expect(refused).toMatchObject({ status: "failed", code: "runtime_unavailable" });
      expect(refused.error).toContain("Redis");
      proxy.heal();
      // Healed: its late outcome cannot replace the interruption the run already went on with.
      await sleep(LEASE_MS);
      const done = await callCodeMode(onB.client, "wait", { runId });
      expect(done, `${done.code}: ${done.error}`).toMatchObject({ status: "completed" });
      expect(done.value).toMatchObject({ code: "nested_tool_failed" });
      expectFinishedOnce(await callCodeMode(onB.client, "wait", { runId }));
      // And it serves again: a call it runs is delivered to a wait on another replica.
      const next = await onceRedisAnswers(() => callCodeMode(onCut.client, "exec", { code: slowCall(1.5) }));
      expect(next, `${next.code}: ${next.error}`).toMatchObject({ status: "waiting" });
      const result = await waitUntilDone(onB, next.runId!, 6);
      expect(result, `${result.code}: ${result.error}`).toMatchObject({
        status: "completed",
        value: [{ text: "finished" }],
      });
    } finally {
      await proxy.close();
    }
  });

  it("takes over a run whose claiming replica died mid-wait, before the claim's own lease runs out", async () => {
    const claimer = await replica();
    const [onClaimer, onB, onC] = [await client(claimer), await client(b), await client(c)];
    // The call runs on C, which lives; the replica resuming the run dies while it holds the claim.
    const runId = await execWaiting(onC, slowCall(4));
    // Not awaited: the answer never comes (the client may try to resume its stream for a while).
    void callCodeMode(onClaimer.client, "wait", { runId }).catch(() => null);
    await sleep(300);
    await killGroup(claimer);
    let result = await callCodeMode(onB.client, "wait", { runId });
    // Bounded: busy until the claimer's lease is found gone (a few lease periods), then it resumes.
    for (let attempt = 0; attempt < 20 && result.status !== "completed"; attempt += 1) {
      if (result.status === "failed") {
        expect(result.error).toContain("already being resumed");
        await sleep(250);
      }
      result = await callCodeMode(onB.client, "wait", { runId });
    }
    expect(result, `${result.code}: ${result.error}`).toMatchObject({
      status: "completed",
      value: [{ text: "finished" }],
    });
  });

  it("loses no accepted run and resumes none twice when Redis is killed and restarts from its append-only file", async () => {
    const [onB, onC] = [await client(b), await client(c)];
    const yields: string[] = [];
    for (let index = 0; index < 5; index += 1) {
      const waiting = await callCodeMode(onB.client, "exec", {
        code: `await yield_control("r"); return ${index};`,
      });
      expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
      yields.push(waiting.runId!);
    }
    // A call on B that finishes while Redis is away: B records it once Redis is back.
    const slowRun = await execWaiting(onB, slowCall(2));
    await redis.halt();
    const down = await callCodeMode(onC.client, "wait", { runId: yields[0] });
    expect(down).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(down.error).toContain("Redis");
    const refused = await callCodeMode(onC.client, "exec", { code: `await yield_control("x"); return 1;` });
    expect(refused).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    // Down for longer than a lease: every lease is gone when it comes back, and nobody is taken for dead.
    await sleep(2 * LEASE_MS);
    await redis.start();
    for (const [index, runId] of yields.entries()) {
      const done = await onceRedisAnswers(() => callCodeMode(onC.client, "wait", { runId }));
      expect(done, `${done.code}: ${done.error}`).toMatchObject({ status: "completed", value: index });
      expectFinishedOnce(await callCodeMode(onB.client, "wait", { runId }));
    }
    const slow = await waitUntilDone(onC, slowRun, 6);
    expect(slow, `${slow.code}: ${slow.error}`).toMatchObject({
      status: "completed",
      value: [{ text: "finished" }],
    });
  });

  it("keeps a live replica's call through a Redis that stalls for longer than a lease (DEBUG SLEEP)", async () => {
    const [onB, onC] = [await client(b), await client(c)];
    const runId = await execWaiting(onB, slowCall(3));
    const stalled = redis.command("DEBUG", "SLEEP", String((2 * LEASE_MS) / 1000));
    // A wait during the stall takes longer, it does not fail (the stall is under commandTimeoutMs).
    const result = await waitUntilDone(onC, runId, 8);
    expect(await stalled).toBe("+OK");
    expect(result, `${result.code}: ${result.error}`).toMatchObject({
      status: "completed",
      value: [{ text: "finished" }],
    });
  });

  it("answers snapshot_restore_failed, never a wrong result, after Redis restarts without its data", async () => {
    const [onB, onC] = [await client(b), await client(c)];
    const yielded = await callCodeMode(onB.client, "exec", {
      code: `await yield_control("r"); return "never";`,
    });
    const running = await execWaiting(onB, slowCall(1));
    await redis.halt();
    redis.wipe();
    await redis.start();
    for (const runId of [yielded.runId!, running]) {
      const lost = await onceRedisAnswers(() => callCodeMode(onC.client, "wait", { runId }));
      expect(lost, `${lost.code}: ${lost.error}`).toMatchObject({
        status: "failed",
        code: "snapshot_restore_failed",
      });
      expect(lost.error).toContain("lost its records");
    }
    // The deployment goes on on the empty Redis.
    const again = await onceRedisAnswers(() => callCodeMode(onB.client, "exec", { code: slowCall(1) }));
    expect((await waitUntilDone(onC, again.runId!, 6)).value).toEqual([{ text: "finished" }]);
  });
});
