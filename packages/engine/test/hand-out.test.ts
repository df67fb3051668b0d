import type { HostTool } from "@codecell/contract";
import { afterAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine, type NestedToolCall } from "../src/index.js";
import { context } from "./support.js";

const engines: CodeModeEngine[] = [];
afterAll(async () => {
  for (const engine of engines) await engine.close();
});

const clientTool = (name: string): HostTool => ({
  name,
  description: `The client's ${name}.`,
  parameters: { type: "object", properties: { path: { type: "string" } } },
  source: "client",
  owner: "app",
});

const tools: HostTool[] = [
  clientTool("select_file"),
  clientTool("open_file"),
  {
    name: "held_echo",
    description: "Echo its input once the test lets it finish.",
    parameters: { type: "object", properties: { value: { type: "string" } } },
    source: "core",
    owner: "host",
  },
];

/**
 * Hands client tools out (the way an agent endpoint does) and runs the one host tool, which answers only
 * when the test calls `release()`: whether it is still running at a given moment is up to the test, not
 * to a timer racing the engine.
 */
function handingExecutor() {
  const handedOut: NestedToolCall[] = [];
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    handedOut,
    release: () => release(),
    executor: {
      async callTool(call: NestedToolCall) {
        if (call.tool.source === "client") {
          call.handOut();
          handedOut.push(call);
          return new Promise(() => {});
        }
        await released;
        return { echoed: (call.input as { value: string }).value };
      },
    },
  };
}

function setup(timeoutMs = 5_000) {
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs } });
  engines.push(engine);
  const { executor, handedOut, release } = handingExecutor();
  const run = engine.prepareRun({ tools, context: context(), executor });
  return { engine, run, handedOut, release };
}

describe("handing a nested call out of the host", () => {
  it("suspends at once, not at the exec deadline, and resumes with the outcome given later", async () => {
    // The exec deadline (60 s) lies past the test's own timeout (20 s): a suspension that waited for
    // the deadline would fail the test, so only handing the call out can end the exec in time.
    const { engine, run, handedOut } = setup(60_000);
    const first = await run.exec(
      { code: `const picked = await tools.select_file({ path: "a" }); return { picked };` },
      { toolCallId: "exec-1" },
    );
    expect(first).toMatchObject({
      status: "waiting",
      reason: "pending_tools",
      pendingToolCalls: [{ toolId: "client:app:select_file" }],
    });
    if (first.status !== "waiting") throw new Error("not waiting");
    expect(handedOut.map((call) => call.callId)).toEqual([first.pendingToolCalls?.[0]?.callId]);
    // Nothing of the handed-out call stays in flight here.
    expect(engine.callsInFlight()).toEqual({ runs: 0, calls: 0 });
    const settled = await engine.settleHandedOutCall(first.runId, handedOut[0]!.callId, {
      ok: true,
      value: "a.txt",
    });
    expect(settled).toBe("recorded");
    const second = await run.wait({ runId: first.runId }, { toolCallId: "wait-1" });
    expect(second).toMatchObject({ status: "completed", value: { picked: "a.txt" } });
    const entries = engine.exportTrajectory().entries;
    const nested = entries.find((entry) => entry.tool === "client:app:select_file");
    // Handed out, then answered: the entry no longer waits.
    expect(nested).toMatchObject({ parentToolCallId: "exec-1", status: "completed" });
    expect(nested?.notes?.[0]).toContain("handed out");
  });

  it("hands out parallel calls together and delivers a client's error as a catchable error", async () => {
    const { engine, run, handedOut } = setup();
    const first = await run.exec(
      {
        code: `
          const [a, b] = await Promise.allSettled([
            tools.select_file({ path: "x" }),
            tools.open_file({ path: "y" }),
          ]);
          return { a: a.status === "fulfilled" ? a.value : "rejected", b: b.status === "rejected" ? b.reason.message : "ok" };
        `,
      },
      { toolCallId: "exec-2" },
    );
    if (first.status !== "waiting") throw new Error(`not waiting: ${JSON.stringify(first)}`);
    expect(first.pendingToolCalls?.map((call) => call.toolId).sort()).toEqual([
      "client:app:open_file",
      "client:app:select_file",
    ]);
    expect(handedOut).toHaveLength(2);
    const [select, open] = handedOut;
    await engine.settleHandedOutCall(first.runId, select!.callId, { ok: true, value: "x!" });
    await engine.settleHandedOutCall(first.runId, open!.callId, { ok: false, message: "no such file" });
    const second = await run.wait({ runId: first.runId }, { toolCallId: "wait-2" });
    expect(second).toMatchObject({
      status: "completed",
      value: { a: "x!", b: expect.stringContaining("no such file") },
    });
    const status = (tool: string) =>
      engine.exportTrajectory().entries.find((entry) => entry.tool === tool && entry.kind === "nested");
    expect(status("client:app:select_file")).toMatchObject({ status: "completed" });
    expect(status("client:app:open_file")).toMatchObject({
      status: "failed",
      code: "nested_tool_failed",
      error: expect.stringContaining("no such file"),
    });
  });

  it("keeps a host call that runs beside a handed-out one running while suspended", async () => {
    const { engine, run, handedOut, release } = setup();
    const first = await run.exec(
      {
        code: `const [held, picked] = await Promise.all([tools.held_echo({ value: "h" }), tools.select_file({})]); return { held, picked };`,
      },
      { toolCallId: "exec-3" },
    );
    if (first.status !== "waiting") throw new Error("not waiting");
    expect(first.pendingToolCalls?.map((call) => call.toolId).sort()).toEqual([
      "client:app:select_file",
      "core:host:held_echo",
    ]);
    // The host call is still running here, suspended or not: the run does not cancel it.
    expect(engine.callsInFlight().calls).toBe(1);
    release();
    await engine.settleHandedOutCall(first.runId, handedOut[0]!.callId, { ok: true, value: "z" });
    let result = await run.wait({ runId: first.runId }, { toolCallId: "wait-3" });
    for (let round = 0; round < 20 && result.status === "waiting"; round++)
      result = await run.wait({ runId: result.runId }, { toolCallId: `wait-4-${round}` });
    expect(result).toMatchObject({ status: "completed", value: { held: { echoed: "h" }, picked: "z" } });
  });
});
