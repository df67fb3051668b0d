import { afterAll, describe, expect, it } from "vitest";
import { createCodeModeEngine, type NestedToolCall, type RunProgress } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 10_000 } });
afterAll(() => engine.close());

const prepare = (executor = new TestExecutor()) =>
  engine.prepareRun({ tools: hostTools, context: context(), executor });

describe("streaming updates and cancellation of one control call", () => {
  // Spec: "Streaming updates where available": nested calls' progress and the run's own progress
  // reach the host while the call runs.
  it("reports nested calls started and settled, and the progress a nested tool reports", async () => {
    const events: RunProgress[] = [];
    const result = await prepare().exec(
      { code: `return await tools.slow_echo({ ms: 200, value: "v" });` },
      { toolCallId: "exec-progress", onProgress: (event) => events.push(event) },
    );
    expect(result, JSON.stringify(result)).toMatchObject({ status: "completed", value: "v" });
    expect(events).toHaveLength(3);
    expect(events).toEqual(
      expect.arrayContaining([
        { kind: "calls", started: 1, settled: 0, pending: 1 },
        expect.objectContaining({
          kind: "tool",
          toolId: "core:host:slow_echo",
          progress: 0,
          total: 1,
          message: "started",
        }),
      ]),
    );
    expect(events.at(-1)).toEqual({ kind: "calls", started: 1, settled: 1, pending: 0 });
  });

  it("sends nothing once the call has returned, even while a nested call of the waiting run goes on", async () => {
    const quick = createCodeModeEngine({ config: { enabled: true, timeoutMs: 300 } });
    try {
      const events: RunProgress[] = [];
      const run = quick.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      const first = await run.exec(
        { code: `return await tools.slow_echo({ ms: 1500, value: "late" });` },
        { toolCallId: "exec-quiet", onProgress: (event) => events.push(event) },
      );
      // Cold starts may eat the whole 300 ms; the run then fails before the call, and that is fine here.
      if (first.status !== "waiting") return;
      const seen = events.length;
      await new Promise((resolve) => setTimeout(resolve, 1800));
      expect(events.length).toBe(seen);
    } finally {
      await quick.close();
    }
  });

  // Cancellation (the gateway's notifications/cancelled): the cell stops, nested calls in flight are
  // cancelled, and nothing the cell would have done next happens.
  it("aborts the cell and its nested calls when the call's signal aborts", async () => {
    const executor = new TestExecutor();
    const controller = new AbortController();
    const pending = prepare(executor).exec(
      {
        code: `await tools.slow_echo({ ms: 5000, value: 1 }); await tools.read_file({ path: "next.md" }); return 2;`,
      },
      { toolCallId: "exec-cancel", signal: controller.signal },
    );
    const started = Date.now();
    while (!executor.calls.some((call) => call.toolId === "core:host:slow_echo")) {
      if (Date.now() - started > 8000) throw new Error("slow_echo never started");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ status: "failed", code: "aborted" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(executor.calls.map((call) => call.toolId)).toEqual(["core:host:slow_echo"]);
    const trajectory = engine.exportTrajectory({ parentToolCallId: "exec-cancel" });
    expect(trajectory.entries.find((entry) => entry.tool === "core:host:slow_echo")).toMatchObject({
      status: "failed",
      code: "aborted",
    });
  });

  // A call already inside its tool when the run is cancelled (a file half written) cannot be taken
  // back, but the answer that says the run ended must come after it: nothing the run did lands later.
  it("answers an aborted run only once the calls inside their tools have returned", async () => {
    const effects: number[] = [];
    let entered = 0;
    class StubbornExecutor extends TestExecutor {
      override async callTool(call: NestedToolCall): Promise<unknown> {
        if (call.tool.name !== "slow_echo") return super.callTool(call);
        entered++;
        // Ignores its signal, as a tool in the middle of a write does.
        await new Promise((resolve) => setTimeout(resolve, 400));
        effects.push(Number((call.input as { value: number }).value));
        return null;
      }
    }
    const controller = new AbortController();
    const pending = prepare(new StubbornExecutor()).exec(
      {
        code: `await Promise.all([1, 2, 3].map((value) => tools.slow_echo({ ms: 0, value }))); return "all";`,
      },
      { toolCallId: "exec-stubborn", signal: controller.signal },
    );
    const started = Date.now();
    while (entered < 3) {
      if (Date.now() - started > 8000) throw new Error("the calls never started");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ status: "failed", code: "aborted" });
    const atAnswer = effects.length;
    expect(atAnswer).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(effects.length).toBe(atAnswer);
  });
});
