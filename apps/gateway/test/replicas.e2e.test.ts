// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import { baseConfig, type Connected, callCodeMode, type HttpGateway, makeSetup } from "./harness.js";
import { ReplicaFleet, redisSnapshotStore } from "./support/replicas.js";

const TOKEN = "replica-test-token-0123456789";
const SECRET = "replica-test-integrity-secret-0123456789abcdef";
/** Every client is the same principal in the same conversation: any replica may serve its waits. */
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "chat-replicas" };

type Result = Awaited<ReturnType<typeof callCodeMode>>;

if (redisSkipReason) console.warn(redisSkipReason);

// Several `codecell serve --http` processes on one real redis-server, as behind a load balancer without
// sticky sessions: a run suspended on one replica is resumed by another.
describe.skipIf(redisSkipReason !== null)("gateway replicas on one Redis", () => {
  let redis: RunningRedis;
  let configPath: string;
  const fleet = new ReplicaFleet(HEADERS);

  beforeAll(async () => {
    redis = await startRedisServer();
    configPath = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 2500 }, allow: ["*", "core:codecell:exec"] },
        mcpServers: {},
        http: { tokens: [{ name: "alice", token: TOKEN }] },
        snapshotStore: redisSnapshotStore("replicas:", { replicaLeaseMs: 1500, maxLiveRuns: 500 }),
      }),
    ).configPath;
  });
  afterEach(() => fleet.closeClients());
  afterAll(async () => {
    await fleet.stopAll();
    await redis?.stop();
  });

  /** A started, warmed replica. */
  const replica = () =>
    fleet.start(configPath, { env: { REDIS_URL: redis.url, CODECELL_SNAPSHOT_SECRET: SECRET } });
  const client = (gateway: HttpGateway) => fleet.client(gateway);

  async function waitUntilDone(on: Connected, runId: string): Promise<Result> {
    let result = await callCodeMode(on.client, "wait", { runId });
    // Bounded: each wait lasts at most timeoutMs.
    for (let attempt = 0; attempt < 12 && result.status === "waiting"; attempt += 1) {
      result = await callCodeMode(on.client, "wait", { runId });
    }
    return result;
  }

  let a: HttpGateway;
  let b: HttpGateway;
  let c: HttpGateway;

  it("starts three replicas on one Redis", async () => {
    [a, b, c] = await Promise.all([replica(), replica(), replica()]);
    expect(new Set([a.mcpUrl, b.mcpUrl, c.mcpUrl]).size).toBe(3);
  });

  it("yields on one replica and resumes on a second, then on a third", async () => {
    const [onA, onB, onC] = [await client(a), await client(b), await client(c)];
    const first = await callCodeMode(onA.client, "exec", {
      code: `text("on the first"); await yield_control("one"); text("on the second"); await yield_control("two"); return "done";`,
    });
    expect(first, JSON.stringify(first)).toMatchObject({ status: "waiting", reason: "yield" });
    const second = await callCodeMode(onB.client, "wait", { runId: first.runId });
    expect(second).toMatchObject({
      status: "waiting",
      runId: first.runId,
      output: [{ text: "on the second" }],
    });
    const third = await callCodeMode(onC.client, "wait", { runId: first.runId });
    expect(third).toMatchObject({ status: "completed", value: "done" });
    // Finished on the third replica means finished everywhere.
    expect(await callCodeMode(onA.client, "wait", { runId: first.runId })).toMatchObject({
      status: "failed",
      code: "invalid_input",
    });
  });

  it("delivers a slow downstream call settled by replica A to a wait on replica B", async () => {
    const [onA, onB] = [await client(a), await client(b)];
    // The shell's parent is the replica that ran the call: the value says where it ran.
    const waiting = await callCodeMode(onA.client, "exec", {
      code: `const r = await tools.call("core:codecell:exec", { command: "sleep 3.5; echo ran-in-$PPID" }); return r.stdout.trim();`,
    });
    expect(waiting, `${waiting.code}: ${waiting.error}`).toMatchObject({
      status: "waiting",
      reason: "pending_tools",
    });
    const result = await waitUntilDone(onB, waiting.runId!);
    expect(result, `${result.code}: ${result.error}`).toMatchObject({ status: "completed" });
    expect(result.value).toMatch(/^ran-in-\d+$/);
    expect(result.value).not.toBe(`ran-in-${b.child.pid}`);
  });

  it("serves 100 runs suspended on one replica from another", async () => {
    const [onA, onB] = [await client(a), await client(b)];
    const runIds: string[] = [];
    for (let index = 0; index < 100; index += 1) {
      const waiting = await callCodeMode(onA.client, "exec", {
        code: `const n = ${index}; await yield_control("later"); return n * 2;`,
      });
      expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
      runIds.push(waiting.runId!);
    }
    const values: unknown[] = [];
    for (const runId of runIds) values.push((await callCodeMode(onB.client, "wait", { runId })).value);
    expect(values).toEqual(runIds.map((_runId, index) => index * 2));
  });

  it("reports a call as interrupted when its replica is SIGKILLed, and finishes the run on another", async () => {
    const doomed = await replica();
    const [onDoomed, onB] = [await client(doomed), await client(b)];
    const waiting = await callCodeMode(onDoomed.client, "exec", {
      code: `
        text("before the crash");
        try { await tools.call("core:codecell:exec", { command: "sleep 60" }); return "no crash"; }
        catch (error) { return { code: error.code ?? null, message: String(error.message) }; }`,
    });
    expect(waiting, `${waiting.code}: ${waiting.error}`).toMatchObject({ status: "waiting" });
    doomed.child.kill("SIGKILL");
    await doomed.stop();
    const result = await waitUntilDone(onB, waiting.runId!);
    expect(result, `${result.code}: ${result.error}`).toMatchObject({
      status: "completed",
      value: { code: "nested_tool_failed" },
    });
    expect((result.value as { message: string }).message).toContain("interrupted");
  });

  it("answers a clear error, never a wrong result, when Redis goes away and comes back empty", async () => {
    const [onA, onB] = [await client(a), await client(b)];
    const waiting = await callCodeMode(onA.client, "exec", {
      code: `await yield_control("wait for Redis"); return "must not be answered from nothing";`,
    });
    expect(waiting.status).toBe("waiting");
    await redis.halt();
    const down = await callCodeMode(onB.client, "wait", { runId: waiting.runId });
    expect(down).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(down.error).toContain("Redis");
    await redis.restart();
    let lost = await callCodeMode(onB.client, "wait", { runId: waiting.runId });
    // Bounded: the replica reconnects within about a second.
    for (let attempt = 0; attempt < 30 && lost.code === "runtime_unavailable"; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      lost = await callCodeMode(onB.client, "wait", { runId: waiting.runId });
    }
    expect(lost).toMatchObject({ status: "failed", code: "snapshot_restore_failed" });
    expect(lost.error).toContain("lost its records");
    // And the replicas work on the new, empty Redis.
    const again = await callCodeMode(onA.client, "exec", { code: `await yield_control("x"); return 7;` });
    expect(await callCodeMode(onB.client, "wait", { runId: again.runId })).toMatchObject({
      status: "completed",
      value: 7,
    });
  });
});
