import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CodeModeResult, JsonValue } from "@codecell/contract";
import { openSnapshotStore, type SnapshotStore, SqliteSnapshotBackend } from "@codecell/snapshot-store";
import { afterAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine, type NestedToolCall } from "../src/index.js";
import { completedValue, context, failedError, hostTools, TestExecutor, waitingRunId } from "./support.js";

// Spec, "Limits": `maxPendingToolCalls` bounds the nested tool calls
// in flight at once. codecell keeps that bound and lets further calls wait their turn in order, up to
// `maxQueuedToolCalls`; searches, describes and yields take no slot.

const engines: CodeModeEngine[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const engine of engines) await engine.close();
  for (const cleanup of cleanups) await cleanup();
});

function newEngine(config: Record<string, unknown>, store?: SnapshotStore): CodeModeEngine {
  const engine = createCodeModeEngine({
    config: { enabled: true, timeoutMs: 20_000, ...config },
    ...(store ? { store } : {}),
  });
  engines.push(engine);
  return engine;
}

/**
 * The test tools, watched: how many `slow_echo` calls run at once, in which order they start, and a
 * gate that holds every `slow_echo` until the test opens it.
 */
class ObservingExecutor extends TestExecutor {
  inFlight = 0;
  most = 0;
  readonly startOrder: JsonValue[] = [];
  #open = true;
  #waiters: Array<() => void> = [];

  close(): void {
    this.#open = false;
  }

  open(): void {
    this.#open = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  override async callTool(call: NestedToolCall): Promise<unknown> {
    if (call.tool.name !== "slow_echo") return super.callTool(call);
    this.most = Math.max(this.most, ++this.inFlight);
    this.startOrder.push((call.input as { value?: JsonValue }).value ?? null);
    try {
      if (!this.#open) await new Promise<void>((resolve) => this.#waiters.push(resolve));
      return await super.callTool(call);
    } finally {
      this.inFlight--;
    }
  }
}

function prepare(engine: CodeModeEngine, executor = new ObservingExecutor()) {
  const run = engine.prepareRun({ tools: hostTools, context: context(), executor });
  let n = 0;
  return {
    executor,
    exec: (code: string) => run.exec({ code }, { toolCallId: `exec-${++n}` }),
    wait: (runId: string) => run.wait({ runId }, { toolCallId: `wait-${++n}` }),
  };
}

const range = (count: number) => Array.from({ length: count }, (_, index) => index + 1);

describe("calls beyond maxPendingToolCalls wait their turn", () => {
  it("completes a Promise.all over 60 items in order, never more than maxPendingToolCalls in flight", async () => {
    const { exec, executor } = prepare(newEngine({ maxPendingToolCalls: 4 }));
    const result = await exec(`
      const ids = Array.from({ length: 60 }, (_, i) => i + 1);
      const results = await Promise.all(ids.map((id) => tools.slow_echo({ ms: 5, value: id })));
      return results;
    `);
    expect(result).toMatchObject({ status: "completed", value: range(60) });
    expect(executor.most).toBe(4);
    // Queued calls start in the order the cell made them.
    expect(executor.startOrder).toEqual(range(60));
    expect(result.telemetry.nested.calls).toBe(60);
  });

  it("does the same with the default config (16 at once, 1,000 queued) over 40 items", async () => {
    const { exec, executor } = prepare(newEngine({}));
    const result = await exec(`
      const files = Array.from({ length: 40 }, (_, i) => "file-" + i + ".txt");
      const contents = await Promise.all(files.map(async (path, i) => {
        const echoed = await tools.slow_echo({ ms: 5, value: i });
        const file = await tools.read_file({ path });
        return echoed + ":" + file.content;
      }));
      return contents;
    `);
    expect(result).toMatchObject({
      status: "completed",
      value: range(40).map((n) => `${n - 1}:content of file-${n - 1}.txt`),
    });
    expect(executor.most).toBeLessThanOrEqual(16);
    expect(executor.most).toBeGreaterThan(1);
  });

  it("fails past maxQueuedToolCalls with too_many_pending_tool_calls, naming the setting", async () => {
    const { exec, executor } = prepare(newEngine({ maxPendingToolCalls: 2, maxQueuedToolCalls: 3 }));
    const caught = await exec(`
      const calls = [1, 2, 3, 4, 5, 6].map((i) =>
        tools.slow_echo({ ms: 5, value: i }).catch((error) => [error.code, error.message]));
      return await Promise.all(calls);
    `);
    expect(caught.status).toBe("completed");
    const values = completedValue<unknown[]>(caught);
    expect(values.slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
    const [code, message] = values[5] as [string, string];
    expect(code).toBe("too_many_pending_tool_calls");
    expect(message).toContain("maxQueuedToolCalls");
    expect(message).toContain("maxPendingToolCalls");
    expect(executor.most).toBe(2);

    const uncaught = await exec(`
      return await Promise.all([1, 2, 3, 4, 5, 6].map((i) => tools.slow_echo({ ms: 5, value: i })));
    `);
    expect(uncaught).toMatchObject({ status: "failed", code: "too_many_pending_tool_calls" });
    expect(failedError(uncaught)).toContain("maxQueuedToolCalls");
    expect(uncaught.telemetry.limitFailures.pendingToolCalls).toBe(1);
  });

  it("with maxQueuedToolCalls 0 refuses at maxPendingToolCalls itself, as the spec has it", async () => {
    // Spec, "Limits": calls beyond maxPendingToolCalls fail with too_many_pending_tool_calls.
    const { exec } = prepare(newEngine({ maxPendingToolCalls: 4, maxQueuedToolCalls: 0 }));
    const caught = await exec(`
      const calls = [1, 2, 3, 4, 5].map((i) => tools.slow_echo({ ms: 20, value: i }).catch((e) => e.code));
      return await Promise.all(calls);
    `);
    expect(caught).toMatchObject({ status: "completed", value: [1, 2, 3, 4, "too_many_pending_tool_calls"] });
    const uncaught = await exec(`
      return await Promise.all([1, 2, 3, 4, 5].map((i) => tools.slow_echo({ ms: 20, value: i })));
    `);
    expect(uncaught).toMatchObject({ status: "failed", code: "too_many_pending_tool_calls" });
    expect(failedError(uncaught)).toContain("maxPendingToolCalls is 4");
    expect(uncaught.telemetry.limitFailures.pendingToolCalls).toBe(1);
  });
});

describe("searches, describes and yields take no maxPendingToolCalls slot", () => {
  // The promise tested here: "maxPendingToolCalls counts nested tool calls; searches, describes and yields do
  // not take its slots." One slot and no queue: only a second tool call could be refused.
  const strict = { maxPendingToolCalls: 1, maxQueuedToolCalls: 0 };

  it("searches and describes while the one slot is taken", async () => {
    const { exec } = prepare(newEngine(strict));
    const result = await exec(`
      const slow = tools.slow_echo({ ms: 300, value: "slow" });
      const [hits, description] = await Promise.all([tools.search("read a file"), tools.describe("read_file")]);
      return [await slow, hits.length > 0, description.name];
    `);
    expect(result).toMatchObject({ status: "completed", value: ["slow", true, "read_file"] });
    const second = await exec(`
      const slow = tools.slow_echo({ ms: 300, value: "slow" });
      try { await tools.read_file({ path: "a" }); return "not refused"; } catch (error) { await slow; return error.code; }
    `);
    expect(second).toMatchObject({ status: "completed", value: "too_many_pending_tool_calls" });
  });

  it("yields while the one slot is taken", async () => {
    const { exec, wait } = prepare(newEngine(strict));
    const first = await exec(`
      const slow = tools.slow_echo({ ms: 200, value: "slow" });
      await yield_control("checking in");
      return await slow;
    `);
    expect(first).toMatchObject({ status: "waiting", reason: "yield" });
    const done = await wait(waitingRunId(first));
    expect(done).toMatchObject({ status: "completed", value: "slow" });
  });
});

describe("queued calls across a wait", () => {
  const directory = mkdtempSync(join(tmpdir(), "codecell-queue-"));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));

  const stores: Array<[string, () => Promise<SnapshotStore | undefined>]> = [
    ["the default store", async () => undefined],
    [
      "a SQLite store",
      async () => {
        const store = await openSnapshotStore({
          backend: new SqliteSnapshotBackend({ path: join(directory, "runs.sqlite") }),
          sweepIntervalMs: 0,
        });
        cleanups.push(() => store.close());
        return store;
      },
    ],
  ];

  it.each(stores)(
    "suspends with calls queued, drains them while waiting and resumes in order (%s)",
    async (_name, open) => {
      const engine = newEngine({ maxPendingToolCalls: 2, timeoutMs: 1500 }, await open());
      const { exec, wait, executor } = prepare(engine);
      executor.close();
      const first = await exec(`
      text("started");
      const results = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((i) => tools.slow_echo({ ms: 1, value: i })));
      return results;
    `);
      // Two calls hold the slots (gated); six wait their turn and count toward waiting.
      expect(first).toMatchObject({ status: "waiting", reason: "pending_tools" });
      const pending = (
        first as { pendingToolCalls: Array<{ callId: string; toolId: string; queued?: true }> }
      ).pendingToolCalls;
      expect(pending).toHaveLength(8);
      expect(pending.every((call) => call.toolId === "core:host:slow_echo")).toBe(true);
      expect(pending.map((call) => call.queued === true)).toEqual([
        false,
        false,
        true,
        true,
        true,
        true,
        true,
        true,
      ]);
      expect(executor.startOrder).toEqual([1, 2]);

      // The queue drains while the run is suspended; every outcome lands in the store's pending-call record.
      executor.open();
      for (let attempt = 0; attempt < 200 && executor.startOrder.length < 8; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(executor.startOrder).toEqual(range(8));
      const runId = waitingRunId(first);
      const store = await engine.store;
      const { agentId, sessionKey, sessionId, runId: parentRunId } = context();
      let recorded: JsonValue[] = [];
      for (let attempt = 0; attempt < 200; attempt++) {
        const claim = await store.claim(runId, { agentId, sessionKey, sessionId, parentRunId });
        await store.release(claim);
        recorded = claim.pendingCalls.map((call) => (call.outcome?.ok ? call.outcome.value : null));
        if (recorded.every((value) => value !== null)) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(recorded).toEqual(range(8));

      const done: CodeModeResult = await wait(runId);
      expect(done).toMatchObject({ status: "completed", value: range(8) });
      expect(executor.most).toBe(2);
    },
  );

  it("keeps draining in order during the wait itself", async () => {
    const engine = newEngine({ maxPendingToolCalls: 3, timeoutMs: 1500 });
    const { exec, wait, executor } = prepare(engine);
    executor.close();
    const first = await exec(`
      return await Promise.all(Array.from({ length: 20 }, (_, i) => tools.slow_echo({ ms: 2, value: i + 1 })));
    `);
    expect(first).toMatchObject({ status: "waiting", reason: "pending_tools" });
    const waited = wait(waitingRunId(first));
    executor.open();
    const done = await waited;
    expect(done).toMatchObject({ status: "completed", value: range(20) });
    expect(executor.startOrder).toEqual(range(20));
    expect(executor.most).toBe(3);
  });

  it("cancels the queued calls when the run is aborted", async () => {
    const engine = newEngine({ maxPendingToolCalls: 1, timeoutMs: 1500 });
    const { exec, executor } = prepare(engine);
    executor.close();
    const first = await exec(`
      return await Promise.all([1, 2, 3].map((i) => tools.slow_echo({ ms: 1, value: i })));
    `);
    expect(first).toMatchObject({ status: "waiting" });
    expect(await engine.abort({ sessionId: context().sessionId })).toBeGreaterThan(0);
    executor.open();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Only the call that held the slot ever started.
    expect(executor.startOrder).toEqual([1]);
  });
});
