import { readFileSync } from "node:fs";
import type { CodeModeResult } from "@codecell/contract";
import { MemorySnapshotBackend, openSnapshotStore } from "@codecell/snapshot-store";
import { afterAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { context, failedError, hostTools, TestExecutor, waitingRunId } from "./support.js";

describe("the engine", () => {
  const engines: CodeModeEngine[] = [];
  afterAll(async () => {
    for (const engine of engines) await engine.close();
  });

  function newEngine(
    config: Record<string, unknown> = {},
    extra: Partial<Parameters<typeof createCodeModeEngine>[0]> = {},
  ) {
    const engine = createCodeModeEngine({
      config: { enabled: true, timeoutMs: 300, ...config },
      ...extra,
    });
    engines.push(engine);
    return engine;
  }

  function prepare(
    engine: CodeModeEngine,
    overrides: Partial<Parameters<CodeModeEngine["prepareRun"]>[0]> = {},
  ) {
    return engine.prepareRun({
      tools: hostTools,
      context: context(),
      executor: new TestExecutor(),
      ...overrides,
    });
  }

  /**
   * Waits on `runId` until it is no longer waiting (each wait has its own short timeout, and how many a
   * slow call outlives depends on the machine's load): the outcome, not the count, is what users see.
   */
  async function waitUntilSettled(run: ReturnType<typeof prepare>, runId: string): Promise<CodeModeResult> {
    let result = await run.wait({ runId }, { toolCallId: "wait-0" });
    for (let round = 1; round < 50 && result.status === "waiting"; round++)
      result = await run.wait({ runId }, { toolCallId: `wait-${round}` });
    return result;
  }

  const slowCell = `
  text("before");
  const value = await tools.slow_echo({ ms: 600, value: "slow result" });
  text("after restore");
  return { value };
`;

  describe("wait", () => {
    it("suspends on a slow tool, then restores the VM and delivers the result", async () => {
      const engine = newEngine();
      const run = prepare(engine);
      const first = await run.exec({ code: slowCell }, { toolCallId: "exec-1" });
      expect(first).toMatchObject({
        status: "waiting",
        reason: "pending_tools",
        pendingToolCalls: [{ toolId: "core:host:slow_echo" }],
        output: [{ type: "text", text: "before" }],
      });
      expect(first.telemetry.snapshotEvents).toEqual([expect.objectContaining({ event: "stored" })]);
      const runId = waitingRunId(first);
      expect(runId.length).toBeGreaterThanOrEqual(22);
      // The call keeps running on the host; wait gets its result (within its own timeout, possibly after a
      // few waits that find it still running).
      const result = await waitUntilSettled(run, runId);
      expect(result).toMatchObject({
        status: "completed",
        value: { value: "slow result" },
        output: [{ type: "text", text: "after restore" }],
      });
      expect(result.telemetry.execCount).toBe(1);
      expect(result.telemetry.waitCount).toBeGreaterThanOrEqual(1);
      expect(result.telemetry.snapshotEvents.map((event) => event.event)).toContain("deleted");
      // Completed: the snapshot is gone.
      expect(await (await engine.store).stats()).toMatchObject({ live: 0 });
      expect(await run.wait({ runId }, { toolCallId: "wait-3" })).toMatchObject({
        status: "failed",
        code: "invalid_input",
      });
    });

    it("the same prepared surface is not needed: a later prepareRun of the same agent run resumes", async () => {
      const engine = newEngine();
      const first = await prepare(engine).exec({ code: slowCell }, { toolCallId: "exec-1" });
      const later = prepare(engine);
      const result = await waitUntilSettled(later, waitingRunId(first));
      expect(result).toMatchObject({ status: "completed", value: { value: "slow result" } });
    });

    it("yield_control returns waiting with reason yield, and wait continues after it", async () => {
      const engine = newEngine({ timeoutMs: 2000 });
      const run = prepare(engine);
      const first = await run.exec(
        { code: `text("step 1"); await yield_control("checkpoint"); text("step 2"); return 42;` },
        { toolCallId: "exec-1" },
      );
      expect(first).toMatchObject({
        status: "waiting",
        reason: "yield",
        output: [{ type: "text", text: "step 1" }],
      });
      expect(first).not.toHaveProperty("pendingToolCalls");
      const second = await run.wait({ runId: waitingRunId(first) }, { toolCallId: "wait-1" });
      expect(second).toMatchObject({
        status: "completed",
        value: 42,
        output: [{ type: "text", text: "step 2" }],
      });
    });

    it("a namespace-free nested call that fails while suspended reaches the guest as a catchable error", async () => {
      const engine = newEngine();
      const run = prepare(engine);
      const first = await run.exec(
        {
          code: `try { await tools.slow_echo({ ms: 400, value: 1 }); await tools.fail_always({}); } catch (e) { return e.code; }`,
        },
        { toolCallId: "exec-1" },
      );
      const result = await waitUntilSettled(run, waitingRunId(first));
      expect(result).toMatchObject({ status: "completed", value: "nested_tool_failed" });
    });

    it.each([
      ["another session", { sessionId: "session-2" }],
      ["another agent", { agentId: "agent-2" }],
      ["another agent run", { runId: "run-2" }],
      ["another session key", { sessionKey: "key-2" }],
    ])("answers a wait from %s exactly as for an unknown runId", async (_name, scope) => {
      const engine = newEngine();
      const first = await prepare(engine).exec({ code: slowCell }, { toolCallId: "exec-1" });
      const stranger = prepare(engine, { context: context(scope) });
      const foreign = await stranger.wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      const unknown = await stranger.wait({ runId: "AAAAAAAAAAAAAAAAAAAAAAAA" }, { toolCallId: "w" });
      expect(foreign).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(failedError(foreign).replace(waitingRunId(first), "ID")).toBe(
        failedError(unknown).replace("AAAAAAAAAAAAAAAAAAAAAAAA", "ID"),
      );
      // The owner can still resume it.
      expect(await waitUntilSettled(prepare(engine), waitingRunId(first))).toMatchObject({
        status: "completed",
      });
    });

    it.each([
      ["an empty runId", { runId: "" }],
      ["no runId", {}],
      ["an unknown runId", { runId: "nope" }],
    ])("refuses %s with invalid_input", async (_name, input) => {
      const engine = newEngine();
      expect(await prepare(engine).wait(input, { toolCallId: "w" })).toMatchObject({
        status: "failed",
        code: "invalid_input",
      });
    });

    it("refuses an expired run with snapshot_expired", async () => {
      const engine = newEngine({ snapshotTtlSeconds: 1 });
      const run = prepare(engine);
      const first = await run.exec({ code: `await yield_control(); return 1` }, { toolCallId: "exec-1" });
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w" })).toMatchObject({
        status: "failed",
        code: "snapshot_expired",
      });
    });

    it("aborting the agent run aborts its waiting runs and cancels their nested calls", async () => {
      const engine = newEngine();
      const controller = new AbortController();
      const executor = new TestExecutor();
      const run = prepare(engine, { executor, context: { ...context(), signal: controller.signal } });
      const first = await run.exec({ code: slowCell }, { toolCallId: "exec-1" });
      controller.abort();
      // The abort reaches the waiting run as it propagates: wait for its snapshot to go, however busy the machine.
      await expect.poll(async () => (await (await engine.store).stats()).live, { timeout: 10_000 }).toBe(0);
      const result = await prepare(engine).wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      expect(result).toMatchObject({ status: "failed", code: "aborted" });
      expect(await (await engine.store).stats()).toMatchObject({ live: 0 });
    });

    it("ending the session deletes its waiting runs", async () => {
      const engine = newEngine();
      const first = await prepare(engine).exec({ code: slowCell }, { toolCallId: "exec-1" });
      expect(await engine.endSession("session-1")).toBeGreaterThanOrEqual(0);
      const result = await prepare(engine).wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      expect(result.status).toBe("failed");
      expect(["aborted", "invalid_input"]).toContain((result as { code: string }).code);
      expect(await (await engine.store).stats()).toMatchObject({ live: 0 });
    });

    it("refuses a second concurrent wait of the same run", async () => {
      const engine = newEngine({ timeoutMs: 1000 });
      const run = prepare(engine);
      const first = await run.exec(
        { code: `await yield_control(); return await tools.slow_echo({ ms: 300, value: 1 });` },
        { toolCallId: "e" },
      );
      const runId = waitingRunId(first);
      const [a, b] = await Promise.all([
        run.wait({ runId }, { toolCallId: "w1" }),
        run.wait({ runId }, { toolCallId: "w2" }),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses).toEqual(["completed", "failed"]);
      expect([a, b].find((result) => result.status === "failed")).toMatchObject({ code: "invalid_input" });
    });

    it("enforces maxSnapshotBytes with snapshot_limit_exceeded", async () => {
      const engine = newEngine({ maxSnapshotBytes: 1024 });
      const result = await prepare(engine).exec(
        { code: "await yield_control(); return 1" },
        { toolCallId: "e" },
      );
      expect(result).toMatchObject({ status: "failed", code: "snapshot_limit_exceeded" });
      expect(result.telemetry.limitFailures.snapshot).toBe(1);
    });

    it("enforces maxOutputBytes across a suspension", async () => {
      const engine = newEngine({ maxOutputBytes: 2048, timeoutMs: 2000 });
      const run = prepare(engine);
      const first = await run.exec(
        { code: `text("a".repeat(1500)); await yield_control(); text("b".repeat(1500)); return 1;` },
        { toolCallId: "e" },
      );
      expect(first.status).toBe("waiting");
      const second = await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      expect(second).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    });

    it("fails with snapshot_restore_failed when the stored snapshot is corrupt", async () => {
      const backend = new MemorySnapshotBackend();
      const claim = backend.claim.bind(backend);
      backend.claim = async (request) => {
        const answer = await claim(request);
        if (answer.status !== "claimed") return answer;
        const snapshot = Uint8Array.from(answer.record.snapshot);
        snapshot[snapshot.length >> 1]! ^= 0xff;
        return { ...answer, record: { ...answer.record, snapshot } };
      };
      const store = await openSnapshotStore({ backend });
      const engine = newEngine({ timeoutMs: 2000 }, { store });
      const run = prepare(engine);
      const first = await run.exec({ code: "await yield_control(); return 1" }, { toolCallId: "e" });
      const result = await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      expect(result).toMatchObject({ status: "failed", code: "snapshot_restore_failed" });
      await store.close();
    });

    // A record of another snapshot format: a real one suspended by an older codecell (the sandbox's
    // fixture, format 2, with the host state that version wrote), and one whose format no codecell has
    // written yet. Either is refused at wait, saying why and what to do, and the run is over.
    const OLDER_SNAPSHOT = new URL(
      "../../sandbox/test/fixtures/snapshot-string-request-ids.bin",
      import.meta.url,
    );
    it.each([
      {
        name: "an older codecell's record",
        swap: () => ({
          snapshot: new Uint8Array(readFileSync(OLDER_SNAPSHOT)),
          hostState: { runKey: "an-older-run-key", yieldRequestIds: [] },
        }),
        message: /suspended by an older codecell \(snapshot format 2; .*run the cell again/,
      },
      {
        name: "a record of an unknown format",
        swap: (snapshot: Uint8Array) => {
          const unknown = Uint8Array.from(snapshot);
          unknown[4] = 200;
          return { snapshot: unknown };
        },
        message: /snapshot format 200 is not one this codecell reads.*run the cell again/,
      },
    ])(
      "refuses $name at wait with snapshot_restore_failed saying to run the cell again",
      async ({ swap, message }) => {
        const backend = new MemorySnapshotBackend();
        const claim = backend.claim.bind(backend);
        backend.claim = async (request) => {
          const answer = await claim(request);
          if (answer.status !== "claimed") return answer;
          return { ...answer, record: { ...answer.record, ...swap(answer.record.snapshot) } };
        };
        const store = await openSnapshotStore({ backend });
        const engine = newEngine({ timeoutMs: 2000 }, { store });
        const run = prepare(engine);
        const first = await run.exec({ code: "await yield_control(); return 1" }, { toolCallId: "e" });
        const result = await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
        expect(result).toMatchObject({ status: "failed", code: "snapshot_restore_failed" });
        expect(failedError(result)).toMatch(message);
        // The refused run is over: waiting again finds nothing to resume.
        const again = await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w2" });
        expect(again.status).toBe("failed");
        expect(again).not.toMatchObject({ code: "snapshot_restore_failed" });
        await store.close();
      },
    );
  });

  describe("engine-level telemetry", () => {
    it("counts the snapshot lifecycle of its own store", async () => {
      const engine = newEngine({ timeoutMs: 2000 });
      const run = prepare(engine);
      const first = await run.exec({ code: "await yield_control(); return 1" }, { toolCallId: "e" });
      await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w" });
      await run.wait({ runId: waitingRunId(first) }, { toolCallId: "w2" });
      expect(engine.stats.snapshotEvents).toMatchObject({ stored: 1, resumed: 1, deleted: 1, refused: 1 });
      expect(engine.stats).toMatchObject({
        execCount: 1,
        waitCount: 2,
        results: { completed: 1, waiting: 1, failed: 1 },
      });
    });

    it("CODECELL_DEBUG_CODE_MODE=1 sends debug lines to stderr", async () => {
      const written: string[] = [];
      const original = process.stderr.write.bind(process.stderr);
      process.env.CODECELL_DEBUG_CODE_MODE = "1";
      process.stderr.write = ((chunk: string) => {
        written.push(String(chunk));
        return true;
      }) as typeof process.stderr.write;
      try {
        const engine = newEngine();
        prepare(engine);
      } finally {
        process.stderr.write = original;
        delete process.env.CODECELL_DEBUG_CODE_MODE;
      }
      expect(written.join("")).toMatch(/^\[codecell\] activation: active/);
    });
  });
});
