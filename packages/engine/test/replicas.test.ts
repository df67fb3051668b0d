import type { CodeModeResult } from "@codecell/contract";
import { createSandboxPool, type SandboxPool } from "@codecell/sandbox";
import { openSnapshotStore, RedisSnapshotBackend, type SnapshotStore } from "@codecell/snapshot-store";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { completedValue, context, hostTools, TestExecutor, waitingRunId } from "./support.js";

const SECRET = "engine-replica-test-secret-0123456789abcdef";

/** One gateway replica as the engine sees it: its own engine, executor and store on the shared Redis. */
type Replica = {
  engine: CodeModeEngine;
  store: SnapshotStore;
  executor: TestExecutor;
  close(): Promise<void>;
};

// A wait on one replica resumes a run suspended on another, with the nested call still running on the
// first: its outcome must reach the second through Redis, and its loss must be reported.
describe.skipIf(redisSkipReason !== null)("wait on another replica (Redis store)", () => {
  let server: RunningRedis;
  let prefixes = 0;
  let prefix = "";
  const replicas: Replica[] = [];

  // One warm sandbox pool for every replica: the first VM of a process is slow on a busy machine.
  let pool: SandboxPool;

  beforeAll(async () => {
    server = await startRedisServer();
    pool = createSandboxPool();
    const warm = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 }, pool });
    await warm
      .prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() })
      .exec({ code: "return 1" }, { toolCallId: "warm-up" });
    await warm.close();
  });
  afterAll(async () => {
    await pool.close();
    await server.stop();
  });
  afterEach(async () => {
    for (const replica of replicas.splice(0)) await replica.close();
  });

  async function replica(config: Record<string, unknown> = {}): Promise<Replica> {
    const store = await openSnapshotStore({
      backend: new RedisSnapshotBackend({
        url: server.url,
        secret: SECRET,
        keyPrefix: prefix,
        replicaLeaseMs: 600,
      }),
      sweepIntervalMs: 0,
    });
    const engine = createCodeModeEngine({
      config: { enabled: true, timeoutMs: 3000, ...config },
      store,
      pool,
    });
    const executor = new TestExecutor();
    let closed = false;
    const entry: Replica = {
      engine,
      store,
      executor,
      async close() {
        if (closed) return;
        closed = true;
        await engine.close();
        await store.close();
      },
    };
    replicas.push(entry);
    return entry;
  }

  const run = (on: Replica) =>
    on.engine.prepareRun({ tools: hostTools, context: context(), executor: on.executor });

  /** Polls a condition every 50 ms, for at most 20 s (a bounded loop). */
  async function until(condition: () => boolean): Promise<void> {
    for (let attempt = 0; attempt < 400 && !condition(); attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async function waitUntilDone(on: Replica, runId: string): Promise<CodeModeResult> {
    let result: CodeModeResult = { status: "waiting" } as CodeModeResult;
    // Bounded: each wait lasts at most timeoutMs.
    for (let attempt = 1; attempt <= 20 && result.status === "waiting"; attempt += 1) {
      result = await run(on).wait({ runId }, { toolCallId: `wait-${attempt}` });
    }
    return result;
  }

  it("delivers the outcome of a call that replica A settles to a wait on replica B", async () => {
    prefix = `engine-${++prefixes}:`;
    const a = await replica();
    const b = await replica();
    const first = await run(a).exec(
      {
        code: `text("on A"); const value = await tools.slow_echo({ ms: 4000, value: "slow result" }); return { value };`,
      },
      { toolCallId: "exec-1" },
    );
    expect(first, JSON.stringify(first)).toMatchObject({
      status: "waiting",
      pendingToolCalls: [{ toolId: "core:host:slow_echo" }],
    });
    const result = await waitUntilDone(b, waitingRunId(first));
    expect(result).toMatchObject({ status: "completed", value: { value: "slow result" } });
    expect(a.executor.calls.map((call) => call.toolId)).toEqual(["core:host:slow_echo"]);
    expect(b.executor.calls).toEqual([]);
    // A ran the call for a run B finished: A keeps nothing of it.
    await until(() => a.engine.callsInFlight().runs === 0);
    expect(a.engine.callsInFlight()).toEqual({ runs: 0, calls: 0 });
  });

  it("lets go of a run's calls on the replica running them once the run is gone elsewhere", async () => {
    prefix = `engine-${++prefixes}:`;
    const a = await replica();
    const b = await replica();
    const first = await run(a).exec(
      {
        code: `
          const quick = tools.slow_echo({ ms: 6000, value: "quick" });
          const long = tools.slow_echo({ ms: 60000, value: "long" });
          return [await quick, await long];`,
      },
      { toolCallId: "exec-1" },
    );
    expect(first.status).toBe("waiting");
    expect(a.engine.callsInFlight()).toEqual({ runs: 1, calls: 2 });
    // The conversation is dropped on B: the run is aborted in the shared store.
    expect(await b.engine.abort({ sessionId: context().sessionId })).toBe(1);
    // When A's quick call settles, the store answers that the run is gone: the long call is cancelled
    // and A forgets the run, instead of holding it until its own session ends.
    await until(() => a.engine.callsInFlight().runs === 0);
    expect(a.engine.callsInFlight()).toEqual({ runs: 0, calls: 0 });
  });

  it("reports a call as interrupted when the replica running it is gone, and the run goes on", async () => {
    prefix = `engine-${++prefixes}:`;
    const a = await replica();
    const b = await replica();
    const first = await run(a).exec(
      {
        code: `
          try { await tools.slow_echo({ ms: 60000, value: "never" }); return "no error"; }
          catch (error) { return { message: String(error.message), code: error.code ?? null }; }`,
      },
      { toolCallId: "exec-1" },
    );
    expect(first.status).toBe("waiting");
    await a.close();
    const result = await waitUntilDone(b, waitingRunId(first));
    expect(result).toMatchObject({ status: "completed", value: { code: "nested_tool_failed" } });
    expect(completedValue<{ message: string }>(result).message).toContain("interrupted");
  });

  it("drains calls queued beyond maxPendingToolCalls on replica A while a wait on B delivers them in order", async () => {
    prefix = `engine-${++prefixes}:`;
    const a = await replica({ maxPendingToolCalls: 2, timeoutMs: 1000 });
    const b = await replica({ maxPendingToolCalls: 2, timeoutMs: 1000 });
    let inFlight = 0;
    let most = 0;
    const original = a.executor.callTool.bind(a.executor);
    a.executor.callTool = async (call) => {
      most = Math.max(most, ++inFlight);
      try {
        return await original(call);
      } finally {
        inFlight--;
      }
    };
    // Six calls of 600 ms through two slots: calls 5 and 6 cannot start before the 1 s deadline.
    const first = await run(a).exec(
      {
        code: `return await Promise.all([1, 2, 3, 4, 5, 6].map((i) => tools.slow_echo({ ms: 600, value: i })));`,
      },
      { toolCallId: "exec-1" },
    );
    expect(first, JSON.stringify(first)).toMatchObject({ status: "waiting", reason: "pending_tools" });
    const pending = (first as { pendingToolCalls: Array<{ queued?: true }> }).pendingToolCalls;
    expect(pending.slice(-2).map((call) => call.queued)).toEqual([true, true]);
    const result = await waitUntilDone(b, waitingRunId(first));
    expect(result).toMatchObject({ status: "completed", value: [1, 2, 3, 4, 5, 6] });
    expect(a.executor.calls.map((call) => call.input)).toEqual(
      [1, 2, 3, 4, 5, 6].map((value) => ({ ms: 600, value })),
    );
    expect(b.executor.calls).toEqual([]);
    expect(most).toBe(2);
  });
});
