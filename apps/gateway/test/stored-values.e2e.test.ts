import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import {
  baseConfig,
  type Connected,
  callCodeMode,
  connectHttp,
  connectStdio,
  type HttpGateway,
  makeSetup,
} from "./harness.js";
import { ReplicaFleet, redisSnapshotStore } from "./support/replicas.js";

// store(key, value) / load(key) through the gateway: the values of one conversation live in the
// configured snapshot store, so a later cell reads them in another process and on another replica.
describe("stored values over stdio", () => {
  it("a second cell of the session loads what the first stored; another session sees nothing", async () => {
    const setup = makeSetup(
      baseConfig({ tools: { codeMode: { enabled: true, maxStoreValueBytes: 1024 } }, mcpServers: {} }),
    );
    const mine = await connectStdio(setup.configPath, { args: ["--session", "values-a"] });
    const other = await connectStdio(setup.configPath, { args: ["--session", "values-b"] });
    try {
      const stored = await callCodeMode(mine.client, "exec", {
        code: `await store("issues", [{ id: 7, title: "crash" }]); return "ok";`,
      });
      expect(stored, JSON.stringify(stored)).toMatchObject({ status: "completed", value: "ok" });
      const loaded = await callCodeMode(mine.client, "exec", {
        code: `return { issues: await load("issues"), none: (await load("none")) === undefined };`,
      });
      expect(loaded).toMatchObject({ status: "completed", value: { issues: [{ id: 7 }], none: true } });
      const elsewhere = await callCodeMode(other.client, "exec", {
        code: `return { issues: (await load("issues")) ?? null, keys: await store.keys() };`,
      });
      expect(elsewhere).toMatchObject({ status: "completed", value: { issues: null, keys: [] } });
      const tooBig = await callCodeMode(mine.client, "exec", {
        code: `await store("huge", "x".repeat(2000)); return 1;`,
      });
      expect(tooBig).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
      expect(tooBig.error).toMatch(/maxStoreValueBytes/);
    } finally {
      await mine.close();
      await other.close();
    }
  });

  it("keeps the values of a conversation across a restart on SQLite", async () => {
    const setup = makeSetup(
      baseConfig({ snapshotStore: { kind: "sqlite", path: "./runs.db" }, mcpServers: {} }),
    );
    const before = await connectStdio(setup.configPath, { args: ["--session", "remembered"] });
    const stored = await callCodeMode(before.client, "exec", {
      code: `await store("draft", { lines: ["one", "two"] }); return "stored";`,
    });
    expect(stored, JSON.stringify(stored)).toMatchObject({ status: "completed" });
    await before.close();

    const after = await connectStdio(setup.configPath, { args: ["--session", "remembered"] });
    try {
      const loaded = await callCodeMode(after.client, "exec", { code: `return await load("draft");` });
      expect(loaded).toMatchObject({ status: "completed", value: { lines: ["one", "two"] } });
    } finally {
      await after.close();
    }
    const stranger = await connectStdio(setup.configPath, { args: ["--session", "stranger"] });
    try {
      const refused = await callCodeMode(stranger.client, "exec", { code: `return await store.keys();` });
      expect(refused).toMatchObject({ status: "completed", value: [] });
    } finally {
      await stranger.close();
    }
  });
});

const TOKEN = "stored-values-token-0123456789";
const OTHER_TOKEN = "stored-values-other-0123456789";
const SECRET = "stored-values-integrity-secret-0123456789abcdef";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "codecell-session": "chat-values" };

if (redisSkipReason) console.warn(redisSkipReason);

describe.skipIf(redisSkipReason !== null)("stored values on two replicas sharing Redis", () => {
  let redis: RunningRedis;
  let configPath: string;
  const fleet = new ReplicaFleet(HEADERS);
  const extra: Connected[] = [];
  let a: HttpGateway;
  let b: HttpGateway;

  beforeAll(async () => {
    redis = await startRedisServer();
    configPath = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 5000 } },
        mcpServers: {},
        http: {
          tokens: [
            { name: "alice", token: TOKEN },
            { name: "bob", token: OTHER_TOKEN },
          ],
        },
        snapshotStore: redisSnapshotStore("values:", { replicaLeaseMs: 1500 }),
      }),
    ).configPath;
    const env = { REDIS_URL: redis.url, CODECELL_SNAPSHOT_SECRET: SECRET };
    [a, b] = await Promise.all([fleet.start(configPath, { env }), fleet.start(configPath, { env })]);
  });
  afterEach(async () => {
    await fleet.closeClients();
    for (const client of extra.splice(0)) await client.close();
  });
  afterAll(async () => {
    await fleet.stopAll();
    await redis?.stop();
  });

  async function connect(gateway: HttpGateway, headers: Record<string, string>): Promise<Connected> {
    const connected = await connectHttp(gateway.mcpUrl, {}, { headers });
    extra.push(connected);
    return connected;
  }

  it("a value stored on one replica is loaded on the other, in that conversation only", async () => {
    const [onA, onB] = [await fleet.client(a), await fleet.client(b)];
    const stored = await callCodeMode(onA.client, "exec", {
      code: `await store("seen", { from: "a", n: 41 }); return "stored";`,
    });
    expect(stored, JSON.stringify(stored)).toMatchObject({ status: "completed" });
    const loaded = await callCodeMode(onB.client, "exec", {
      code: `const seen = await load("seen"); await store("seen", { ...seen, n: seen.n + 1 }); return await load("seen");`,
    });
    expect(loaded).toMatchObject({ status: "completed", value: { from: "a", n: 42 } });

    const read = { code: `return { seen: (await load("seen")) ?? null, keys: await store.keys() };` };
    const otherConversation = await connect(b, { ...HEADERS, "codecell-session": "chat-other" });
    expect(await callCodeMode(otherConversation.client, "exec", read)).toMatchObject({
      status: "completed",
      value: { seen: null, keys: [] },
    });
    // Another principal naming the same conversation reads nothing either.
    const bob = await connect(a, { ...HEADERS, authorization: `Bearer ${OTHER_TOKEN}` });
    expect(await callCodeMode(bob.client, "exec", read)).toMatchObject({
      status: "completed",
      value: { seen: null, keys: [] },
    });
  });

  it("a run that stores, suspends on one replica and resumes on the other sees its own writes", async () => {
    const [onA, onB] = [await fleet.client(a), await fleet.client(b)];
    const waiting = await callCodeMode(onA.client, "exec", {
      code: `await store("progress", ["fetched"]); await yield_control("later");
             const progress = await load("progress"); await store("progress", [...progress, "filtered"]);
             return await load("progress");`,
    });
    expect(waiting, JSON.stringify(waiting)).toMatchObject({ status: "waiting", reason: "yield" });
    const resumed = await callCodeMode(onB.client, "wait", { runId: waiting.runId });
    expect(resumed).toMatchObject({ status: "completed", value: ["fetched", "filtered"] });
  });
});
