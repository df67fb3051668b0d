import { createSandboxPool } from "@codecell/sandbox";
import { afterAll, describe, expect, it } from "vitest";
import { createCodeModeEngine } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

/**
 * End to end: the engine passes the session as the sandbox run's owner, so two
 * spinning cells of one session (which hold their workers' threads until their deadline) never make
 * another session's `return 1` wait for them. Deadlines are long on purpose: the polite cell is
 * answered long before the spinners could end on their own, which is what the test checks (an order,
 * not a duration).
 */

const pool = createSandboxPool({ size: 2, maxWorkers: 4 });
const engine = createCodeModeEngine({ pool, config: { enabled: true, timeoutMs: 30_000 } });
afterAll(async () => {
  await engine.close();
  await pool.close();
});

function session(sessionId: string) {
  const run = engine.prepareRun({
    tools: hostTools,
    context: context({ sessionId, sessionKey: `key-${sessionId}`, runId: `run-${sessionId}` }),
    executor: new TestExecutor(),
  });
  let n = 0;
  return (code: string, signal?: AbortSignal) =>
    run.exec({ code }, { toolCallId: `call-${++n}`, ...(signal ? { signal } : {}) });
}

describe("fairness between sessions", () => {
  it("answers another session's return 1 while two cells of one session spin", async () => {
    const hostile = session("hostile");
    const polite = session("polite");
    // A serving engine has warm workers: both base workers have run a cell.
    await Promise.all([polite("return 0"), polite("return 0")]);

    const stop = new AbortController();
    let spinnersEnded = 0;
    const spinners = [0, 1].map(() =>
      hostile("while (true) {}", stop.signal).then((result) => {
        spinnersEnded += 1;
        return result;
      }),
    );
    // Both spinners are on the base workers and have run long enough to count as holding them.
    for (let wait = 0; wait < 200 && pool.stats().liveRuns < 2; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));

    for (let index = 1; index <= 3; index++) {
      expect(await polite(`return ${index}`)).toMatchObject({ status: "completed", value: index });
    }
    expect(spinnersEnded).toBe(0);
    // The pool grew past its two base workers for the held ones, and not past its cap.
    expect(pool.stats().workers).toBeGreaterThan(2);
    expect(pool.stats().workers).toBeLessThanOrEqual(4);

    stop.abort();
    for (const result of await Promise.all(spinners)) {
      expect(result).toMatchObject({ status: "failed", code: "aborted" });
    }
  }, 90_000);
});
