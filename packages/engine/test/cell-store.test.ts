import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CodeModeResult } from "@codecell/contract";
import { createSandboxPool, type SandboxPool } from "@codecell/sandbox";
import { openSnapshotStore, SqliteSnapshotBackend } from "@codecell/snapshot-store";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { completedValue, context, hostTools, TestExecutor, waitingRunId } from "./support.js";

// store(key, value) and load(key): values a cell keeps for the later cells of its conversation, in the
// engine's snapshot store, scoped to the principal and its conversation.
describe("store and load across cells", () => {
  let pool: SandboxPool;
  const engines: CodeModeEngine[] = [];
  let cell = 0;

  beforeAll(() => {
    pool = createSandboxPool();
  });
  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.close();
  });
  afterAll(async () => {
    await pool.close();
  });

  function engine(config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): CodeModeEngine {
    const made = createCodeModeEngine({
      config: { enabled: true, timeoutMs: 30_000, ...config },
      pool,
      ...extra,
    });
    engines.push(made);
    return made;
  }

  function exec(
    on: CodeModeEngine,
    code: string,
    overrides: Parameters<typeof context>[0] = {},
  ): Promise<CodeModeResult> {
    const run = on.prepareRun({
      tools: hostTools,
      context: context(overrides),
      executor: new TestExecutor(),
    });
    return run.exec({ code }, { toolCallId: `cell-${++cell}` });
  }

  it("a second cell of the conversation loads what the first stored; a key never stored is undefined", async () => {
    const on = engine();
    const stored = await exec(
      on,
      `const issues = [{ id: 1, title: "crash" }, { id: 2, title: "typo" }];
       await store("issues", issues);
       await store("count", 2);
       return "stored";`,
    );
    expect(completedValue(stored)).toBe("stored");
    const loaded = await exec(
      on,
      `const issues = await load("issues");
       return { titles: issues.map((issue) => issue.title), count: await load("count"),
                missing: (await load("never")) === undefined, keys: (await store.keys()).sort() };`,
      { runId: "run-2" },
    );
    expect(completedValue(loaded)).toEqual({
      titles: ["crash", "typo"],
      count: 2,
      missing: true,
      keys: ["count", "issues"],
    });
  });

  it("another conversation and another principal see nothing", async () => {
    const on = engine();
    completedValue(await exec(on, `await store("secret", { token: "s3" }); return true;`));
    const read = `return { value: (await load("secret")) ?? null, keys: await store.keys() };`;
    expect(completedValue(await exec(on, read, { sessionId: "session-2" }))).toEqual({
      value: null,
      keys: [],
    });
    // The same conversation name under another principal is another conversation.
    expect(completedValue(await exec(on, read, { sessionKey: "key-2" }))).toEqual({ value: null, keys: [] });
    expect(completedValue(await exec(on, read, { agentId: "agent-2" }))).toEqual({ value: null, keys: [] });
    expect(completedValue(await exec(on, read))).toEqual({ value: { token: "s3" }, keys: ["secret"] });
  });

  it("deletes a key with store.delete or by storing undefined, and many stores at once keep every key", async () => {
    const on = engine();
    const value = await exec(
      on,
      `await Promise.all(Array.from({ length: 24 }, (_, i) => store("k" + i, { i })));
       const before = (await store.keys()).length;
       const deleted = await store.delete("k0");
       const again = await store.delete("k0");
       await store("k1", undefined);
       return { before, deleted, again, after: (await store.keys()).length, k1: (await load("k1")) === undefined,
                k2: await load("k2") };`,
    );
    expect(completedValue(value)).toEqual({
      before: 24,
      deleted: true,
      again: false,
      after: 22,
      k1: true,
      k2: { i: 2 },
    });
  });

  it("refuses values past each cap with output_limit_exceeded and a message naming the cap", async () => {
    const on = engine({ maxStoreValueBytes: 100, maxStoreBytes: 1024, maxStorePrincipalBytes: 1500 });
    const tooBig = await exec(on, `await store("big", "x".repeat(200)); return 1;`);
    expect(tooBig).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    expect(JSON.stringify(tooBig)).toContain("maxStoreValueBytes");

    const caught = await exec(
      on,
      `const codes = [];
       for (let i = 0; i < 20; i++) {
         try { await store("part" + i, "y".repeat(90)); } catch (error) { codes.push(error.code + ": " + error.message); break; }
       }
       return { codes, keys: (await store.keys()).length };`,
    );
    const scope = completedValue<{ codes: string[]; keys: number }>(caught);
    expect(scope.codes).toHaveLength(1);
    expect(scope.codes[0]).toMatch(/^output_limit_exceeded: .*maxStoreBytes/);
    expect(scope.keys).toBeGreaterThan(5);

    // The principal's other conversation counts against its cap.
    const other = await exec(
      on,
      `try { for (let i = 0; i < 20; i++) await store("more" + i, "z".repeat(90)); return "no cap"; }
       catch (error) { return error.code + ": " + error.message; }`,
      { sessionId: "session-2" },
    );
    expect(completedValue<string>(other)).toMatch(/^output_limit_exceeded: .*maxStorePrincipalBytes/);
    // Another principal has a cap of its own.
    expect(
      completedValue(
        await exec(on, `await store("mine", "w".repeat(90)); return 1;`, { sessionKey: "key-9" }),
      ),
    ).toBe(1);
  });

  it("a key is a string of 1 to 256 characters", async () => {
    const on = engine();
    const value = await exec(
      on,
      `const errors = [];
       for (const key of ["", 5, "k".repeat(257)]) {
         try { await store(key, 1); } catch (error) { errors.push(error.message); }
         try { await load(key); } catch (error) { errors.push(error.message); }
       }
       return errors;`,
    );
    const errors = completedValue<string[]>(value);
    expect(errors).toHaveLength(6);
    for (const message of errors) expect(message).toMatch(/key must be a string of 1 to 256 characters/);
  });

  it("values expire storeTtlSeconds after the last store, and a load then says so", async () => {
    const on = engine({ storeTtlSeconds: 1 });
    completedValue(await exec(on, `await store("short", "lived"); return 1;`));
    // Past the TTL whatever the machine's load: 1 s plus a margin.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const after = await exec(
      on,
      `const keys = await store.keys();
       try { await load("short"); return "loaded"; } catch (error) { return { keys, error: error.code + ": " + error.message }; }`,
    );
    const { keys, error } = completedValue<{ keys: string[]; error: string }>(after);
    expect(keys).toEqual([]);
    expect(error).toMatch(/^snapshot_expired: load\("short"\): the value expired.*storeTtlSeconds/);
    // Storing again starts afresh.
    expect(completedValue(await exec(on, `await store("short", 2); return await load("short");`))).toBe(2);
  });

  it("records a store and a load in the trajectory with key and size, never the value", async () => {
    const on = engine();
    completedValue(
      await exec(on, `await store("notes", { text: "private words" }); return await load("notes");`),
    );
    const entries = on
      .exportTrajectory({ sessionId: "session-1" })
      .entries.filter((e) => e.tool === "codecell:store");
    expect(entries.map((entry) => entry.input)).toEqual([
      { op: "set", key: "notes", bytes: 24 },
      { op: "get", key: "notes", bytes: 24, found: true },
    ]);
    expect(entries.every((entry) => entry.status === "completed" && entry.via === "store")).toBe(true);
    expect(JSON.stringify(entries)).not.toContain("private words");
  });

  it("a run that stores, waits and resumes sees its own writes", async () => {
    const on = engine();
    const run = on.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
    const first = await run.exec(
      {
        code: `await store("step", 1); await yield_control("halfway"); await store("step", (await load("step")) + 1); return await load("step");`,
      },
      { toolCallId: "cell-yield" },
    );
    const runId = waitingRunId(first);
    expect(completedValue(await run.wait({ runId }, { toolCallId: "wait-1" }))).toBe(2);
  });

  it("on SQLite the values outlive the engine and its store", async () => {
    const directory = mkdtempSync(join(tmpdir(), "cell-store-"));
    try {
      const path = join(directory, "runs.sqlite");
      const openEngine = async () => {
        const store = await openSnapshotStore({
          backend: new SqliteSnapshotBackend({ path }),
          sweepIntervalMs: 0,
        });
        return { store, engine: engine({}, { store }) };
      };
      const first = await openEngine();
      completedValue(await exec(first.engine, `await store("kept", [1, 2, 3]); return 1;`));
      // Ending the conversation keeps the values of a durable store.
      expect(await first.engine.endStoredValues(context())).toBe(false);
      await first.engine.close();
      await first.store.close();
      const second = await openEngine();
      expect(completedValue(await exec(second.engine, `return await load("kept");`))).toEqual([1, 2, 3]);
      await second.engine.close();
      await second.store.close();
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("drops the conversation's values when it ends on a memory store", async () => {
    const on = engine();
    completedValue(await exec(on, `await store("gone", 1); return 1;`));
    completedValue(await exec(on, `await store("stays", 1); return 1;`, { sessionId: "session-2" }));
    expect(await on.endStoredValues(context())).toBe(true);
    expect(completedValue(await exec(on, `return (await store.keys()).length;`))).toBe(0);
    expect(completedValue(await exec(on, `return await store.keys();`, { sessionId: "session-2" }))).toEqual([
      "stays",
    ]);
  });
});
