// Points of the spec (shared seeds, "Code mode", German and Portuguese pages) that a first round
// missed or bent, one describe per point. Each quotes the spec line it proves, translated.
import type { CodeModeResult } from "@codecell/contract";
import { afterAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

const engines: CodeModeEngine[] = [];
afterAll(async () => {
  for (const engine of engines) await engine.close();
});

function newEngine(config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 2000, ...config }, ...extra });
  engines.push(engine);
  return engine;
}

function setup(engine: CodeModeEngine, overrides: Partial<Parameters<CodeModeEngine["prepareRun"]>[0]> = {}) {
  const executor = new TestExecutor();
  const run = engine.prepareRun({ tools: hostTools, context: context(), executor, ...overrides });
  let n = 0;
  const exec = (code: string) => run.exec({ code }, { toolCallId: `call-${++n}` });
  const wait = (runId: string) => run.wait({ runId }, { toolCallId: `call-${++n}` });
  return { run, executor, exec, wait };
}

const runIdOf = (result: CodeModeResult) => {
  expect(result.status).toBe("waiting");
  return (result as { runId: string }).runId;
};

// A cell that returns without awaiting a call it started; the call's callback adds output.
const returnsEarly = (ms: number) => `
  const late = tools.slow_echo({ ms: ${ms}, value: "late" });
  late.then((value) => text("settled " + value));
  return 1;
`;

describe('spec "exec": completed only when the guest VM has no pending work', () => {
  // Spec, section "exec": "exec returns completed only when the guest VM has no pending work and the
  // final value is JSON-compatible after the output adapter ran."
  it("keeps a call the cell did not await running, and completes after it settles", async () => {
    const engine = newEngine();
    const { exec } = setup(engine);
    const result = await exec(returnsEarly(150));
    expect(result).toMatchObject({
      status: "completed",
      value: 1,
      output: [{ type: "text", text: "settled late" }],
    });
    const nested = engine.exportTrajectory().entries.filter((entry) => entry.kind === "nested");
    expect(nested).toEqual([expect.objectContaining({ tool: "core:host:slow_echo", status: "completed" })]);
  });

  it("returns waiting with the call pending when it outlives the deadline; wait completes the run", async () => {
    const engine = newEngine({ timeoutMs: 300 });
    const { exec, wait } = setup(engine);
    const first = await exec(returnsEarly(900));
    expect(first).toMatchObject({
      status: "waiting",
      reason: "pending_tools",
      pendingToolCalls: [{ toolId: "core:host:slow_echo" }],
    });
    const runId = runIdOf(first);
    let result = await wait(runId);
    for (let round = 0; round < 5 && result.status === "waiting"; round++) result = await wait(runId);
    expect(result).toMatchObject({
      status: "completed",
      value: 1,
      output: [{ type: "text", text: "settled late" }],
    });
  });
});

describe('spec "Configuration": timeoutMs is the cell\'s own wall-clock time', () => {
  // Spec, section "Configuration": "timeoutMs: wall-clock limit for one exec or wait." A worker that is
  // still starting is the runtime's time, not the cell's; start-up has its own bound (sandbox tests).
  it("does not fail `return 1` at the smallest timeout while the engine's first worker cold-starts", async () => {
    const engine = newEngine({ timeoutMs: 100 });
    const { exec } = setup(engine);
    expect(await exec("return 1")).toMatchObject({ status: "completed", value: 1 });
  });
});
