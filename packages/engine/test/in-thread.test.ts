// The engine with its sandbox on the host's own thread (sandbox: { thread: "in-thread" }): what holds
// as on worker threads, and the mode's trade-off. exec.test.ts and wait.test.ts run in this mode too.
import { afterAll, describe, expect, it } from "vitest";
import { createCodeModeEngine } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

const engine = createCodeModeEngine({
  config: { enabled: true, timeoutMs: 1_000 },
  sandbox: { thread: "in-thread" },
});
afterAll(() => engine.close());

function setup(signal?: AbortSignal) {
  const run = engine.prepareRun({
    tools: hostTools,
    context: signal ? { ...context(), signal } : context(),
    executor: new TestExecutor(),
  });
  let n = 0;
  return (code: string) => run.exec({ code }, { toolCallId: `in-thread-${++n}` });
}

describe("the engine with an in-thread sandbox", () => {
  it("runs cells with nested tool calls on the host's thread", async () => {
    const exec = setup();
    const result = await exec(`
      const values = await Promise.all([1, 2, 3].map((i) => tools.slow_echo({ ms: 20, value: i })));
      return values.reduce((a, b) => a + b, 0);
    `);
    expect(result).toMatchObject({ status: "completed", value: 6 });
    expect(engine.sandboxStats()).toMatchObject({ workers: 1 });
  });

  it("aborts a cell waiting on a tool call: the host's loop runs while the cell waits", async () => {
    const controller = new AbortController();
    const exec = setup(controller.signal);
    setTimeout(() => controller.abort(), 50);
    const result = await exec("return await tools.slow_echo({ ms: 5_000, value: 1 })");
    expect(result).toMatchObject({ status: "failed", code: "aborted" });
  });

  it("ends a spinning cell at its deadline, even if aborted meanwhile (the loop is blocked)", async () => {
    const controller = new AbortController();
    const exec = setup(controller.signal);
    const started = Date.now();
    setTimeout(() => controller.abort(), 50);
    const result = await exec("while (true) {}");
    // The abort's timer could not run while the guest held the thread: the interrupt handler stopped the
    // cell at its 1 s deadline.
    expect(result).toMatchObject({ status: "failed", code: "timeout" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});
