import { createSandboxPool } from "@codecell/sandbox";
import { openSnapshotStore, type SnapshotStore } from "@codecell/snapshot-store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { completedValue, context, hostTools, TestExecutor, waitingRunId } from "./support.js";

// Spec, "Runtime state" and "Validation checklist": snapshot and memory limits hold for suspended runs
// too. A run suspended under one config and resumed by a process with a tighter one (a restart with a
// new config, another replica) must fail, saying which limit and how to fix it, not run on.
const pool = createSandboxPool();
const engines: CodeModeEngine[] = [];
let store: SnapshotStore;

beforeAll(async () => {
  store = await openSnapshotStore({ sweepIntervalMs: 0 });
});
afterAll(async () => {
  for (const engine of engines) await engine.close();
  await store.close();
  await pool.close();
});

/** One process of the host: an engine with its own config over the shared store. */
function host(config: Record<string, unknown> = {}) {
  const engine = createCodeModeEngine({
    config: { enabled: true, timeoutMs: 60_000, ...config },
    store,
    pool,
  });
  engines.push(engine);
  let calls = 0;
  const run = engine.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
  return {
    engine,
    exec: (code: string) => run.exec({ code }, { toolCallId: `exec-${++calls}` }),
    wait: (runId: string) => run.wait({ runId }, { toolCallId: `wait-${++calls}` }),
  };
}

// Holds about 3 MB in the heap across the pause.
const holdsMemory = `const big = "x".repeat(3_000_000); await yield_control("pause"); return big.length;`;

describe("wait under tighter limits than the run was suspended under", () => {
  it.each([
    [
      "a smaller memoryLimitBytes",
      { memoryLimitBytes: 2 * 1024 * 1024 },
      "memory_limit_exceeded",
      /memoryLimitBytes 67108864, and this host's limit is 2097152.*run the cell again with exec.*same memoryLimitBytes/,
    ],
    [
      "a smaller maxSnapshotBytes",
      { maxSnapshotBytes: 2048 },
      "snapshot_limit_exceeded",
      /over this host's tools\.codeMode\.maxSnapshotBytes \(2048\).*run the cell again with exec.*same maxSnapshotBytes/,
    ],
  ])(
    "fails with %s, says which limit and how to fix it, and drops the run",
    async (_case, tighter, code, message) => {
      const suspendedUnderDefaults = host();
      const runId = waitingRunId(await suspendedUnderDefaults.exec(holdsMemory));
      const restarted = host(tighter);
      const result = await restarted.wait(runId);
      expect(result).toMatchObject({ status: "failed", code });
      if (result.status !== "failed") return;
      expect(result.error).toMatch(message);
      // Failed is final: no process resumes it afterwards.
      expect((await suspendedUnderDefaults.wait(runId)).status).toBe("failed");
    },
  );

  it("resumes under the same limits or looser ones", async () => {
    const first = host();
    const same = waitingRunId(await first.exec(holdsMemory));
    expect(completedValue(await host().wait(same))).toBe(3_000_000);
    const other = waitingRunId(await first.exec(holdsMemory));
    expect(
      completedValue(
        await host({ memoryLimitBytes: 128 * 1024 * 1024, maxSnapshotBytes: 20 * 1024 * 1024 }).wait(other),
      ),
    ).toBe(3_000_000);
  });
});
