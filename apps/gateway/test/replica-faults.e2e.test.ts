// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import {
  APP_DIR,
  baseConfig,
  type Connected,
  callCodeMode,
  connectHttp,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
} from "./harness.js";
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
  const gateways: HttpGateway[] = [];
  const clients: Connected[] = [];
  let b: HttpGateway;
  let c: HttpGateway;

  const callLog = () => {
    const file = join(setup.dir, "calls.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  };

  beforeAll(async () => {
    redis = await startRedisServer();
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
        snapshotStore: {
          kind: "redis",
          url: "${REDIS_URL}",
          secret: "${CODECELL_SNAPSHOT_SECRET}",
          keyPrefix: "faults:",
          replicaLeaseMs: LEASE_MS,
        },
      }),
    );
    [b, c] = await Promise.all([replica(), replica()]);
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close().catch(() => {});
  });
  afterAll(async () => {
    for (const gateway of gateways.splice(0)) {
      if (gateway.child.exitCode === null) gateway.child.kill("SIGCONT");
      await gateway.stop();
    }
    await redis?.stop();
  });

  /** A started replica (its own process group) whose sandbox has run a first cell. */
  async function replica(redisUrl = redis.url): Promise<HttpGateway> {
    const gateway = await startHttpGateway(setup.configPath, {
      env: { REDIS_URL: redisUrl, CODECELL_SNAPSHOT_SECRET: SECRET },
      detached: true,
    });
    gateways.push(gateway);
    const warm = await connectHttp(gateway.mcpUrl, {}, { headers: HEADERS });
    try {
      // Bounded: a cold start that misses the deadline leaves a warm worker for the next try.
      for (let attempt = 0; attempt < 4; attempt += 1) {
        if ((await callCodeMode(warm.client, "exec", { code: "return 1" })).status === "completed") break;
      }
    } finally {
      await warm.close();
    }
    return gateway;
  }

  async function client(gateway: HttpGateway): Promise<Connected> {
    const connected = await connectHttp(gateway.mcpUrl, {}, { headers: HEADERS });
    clients.push(connected);
    return connected;
  }

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
    // A wait that comes long after the lease ran out, on a replica that never saw the run: at once.
    await sleep(3 * LEASE_MS);
    expectInterrupted(await waitUntilDone(onC, late, 2), 3);
  });
});
