import type { CodeModeResult } from "@codecell/contract";
import type { McpConnector } from "@codecell/mcp-connector";
import { clearCodeModeNamespacesForTest } from "@codecell/namespaces";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  assertCodeModePayload,
  type CodeModeEngine,
  createCodeModeEngine,
  importTrajectory,
  type ModelTool,
  type PrepareRunOptions,
  trajectoryTree,
} from "../src/index.js";
import {
  completedValue,
  context,
  hostTools,
  registerNotesNamespace,
  startMemoryServer,
  TestExecutor,
  waitingRunId,
} from "./support.js";

/**
 * A deterministic stand-in for an LLM provider: it records the tool payload of every request and
 * answers with the next scripted tool call, which may depend on the previous tool result.
 */
class ScriptedModel {
  readonly payloads: string[][] = [];
  constructor(
    readonly script: Array<(previous: CodeModeResult | undefined) => { tool: string; input: unknown } | null>,
  ) {}

  request(tools: readonly ModelTool[], previous: CodeModeResult | undefined) {
    this.payloads.push(tools.map((tool) => tool.name));
    const step = this.script.shift();
    return step ? step(previous) : null;
  }
}

/** One agent turn as a host runs it: prepare the run, then loop model request -> tool call. */
async function agentTurn(engine: CodeModeEngine, options: PrepareRunOptions, model: ScriptedModel) {
  const results: CodeModeResult[] = [];
  let previous: CodeModeResult | undefined;
  for (let turn = 0; turn < 10; turn++) {
    const prepared = engine.prepareRun(options);
    const call = model.request(prepared.modelTools, previous);
    if (!call) break;
    if (prepared.active)
      assertCodeModePayload(
        prepared.modelTools.map((tool) => tool.name),
        ["message"],
      );
    const toolCallId = `model-call-${turn}`;
    previous =
      call.tool === "exec"
        ? await prepared.exec(call.input, { toolCallId })
        : await prepared.wait(call.input, { toolCallId });
    results.push(previous);
  }
  return results;
}

let mcp: McpConnector;
let memory: Awaited<ReturnType<typeof startMemoryServer>>;
beforeAll(async () => {
  memory = await startMemoryServer();
  mcp = memory.mcp;
  registerNotesNamespace();
});
afterAll(async () => {
  clearCodeModeNamespacesForTest();
  await memory?.close();
});

function options(executor: TestExecutor): PrepareRunOptions {
  executor.mcp = mcp;
  return {
    tools: [...hostTools, ...mcp.hostTools()],
    mcpServers: mcp.describeServers(),
    deny: ["admin_*"],
    context: context(),
    executor,
  };
}

it("with code mode disabled, the model sees the small tool set unchanged", async () => {
  const engine = createCodeModeEngine({ config: { enabled: false } });
  const model = new ScriptedModel([() => null]);
  await agentTurn(
    engine,
    { tools: hostTools.slice(0, 3), context: context(), executor: new TestExecutor() },
    model,
  );
  expect(model.payloads).toEqual([["read_file", "exec", "slow_echo"]]);
  await engine.close();
});

/** Holds every slow_echo call until the test releases them: the test, not a timer, decides it is slow. */
class HeldSlowExecutor extends TestExecutor {
  #release: () => void = () => {};
  readonly #released = new Promise<void>((resolve) => {
    this.#release = resolve;
  });

  release(): void {
    this.#release();
  }

  override async callTool(call: Parameters<TestExecutor["callTool"]>[0]): Promise<unknown> {
    if (call.tool.name === "slow_echo") await this.#released;
    return super.callTool(call);
  }
}

it("with code mode enabled, runs the end-to-end plan across all four sources", async () => {
  // A deadline the first cell meets even on a loaded machine; the second cell's slow call is held until
  // the model's wait, so that exec reaches its deadline with the call pending whatever the load.
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 6_000 } });
  const executor = new HeldSlowExecutor();
  const model = new ScriptedModel([
    () => ({
      tool: "exec",
      input: {
        code: `
          const ids = ALL_TOOLS.map((tool) => tool.id);
          const hit = (await tools.search("read local file"))[0];
          const schema = await tools.describe(hit.id);
          const file = await tools.call(hit.id, { path: "notes.md" });
          const picked = await tools.select_file({ prompt: "pick" });
          await Notes.add("from the e2e test");
          const files = (await API.list("mcp")).map((file) => file.path);
          const declaration = await API.read("mcp/memory.d.ts");
          await MCP.memory.createEntities({ entities: [{ name: "Grace", entityType: "person", observations: ["wrote COBOL"] }] });
          let denied;
          try { await tools.call("core:host:admin_delete_everything", {}); } catch (e) { denied = e.code; }
          return { ids, hit: hit.id, required: schema.parameters.required, file, picked, files, declares: declaration.includes("readGraph"), denied };
        `,
      },
    }),
    () => ({
      tool: "exec",
      input: {
        code: `
          text("started");
          const slow = await tools.slow_echo({ ms: 1, value: "late value" });
          const graph = await MCP.memory.readGraph({});
          text("after restore: " + slow);
          return { slow, grace: graph.content[0].text.includes("Grace") };
        `,
      },
    }),
    (previous) => {
      executor.release();
      return { tool: "wait", input: { runId: waitingRunId(previous) } };
    },
    (previous) =>
      previous?.status === "waiting" ? { tool: "wait", input: { runId: previous.runId } } : null,
  ]);
  const results = await agentTurn(engine, options(executor), model);

  // The model saw exactly exec and wait (plus the directOnly message tool) on every request.
  for (const payload of model.payloads) expect(payload).toEqual(["exec", "wait", "message"]);

  const [first, second] = results;
  expect(first).toMatchObject({
    status: "completed",
    value: {
      hit: "core:host:read_file",
      required: ["path"],
      file: { content: "content of notes.md" },
      picked: { path: "picked.txt" },
      files: ["mcp/index.d.ts", "mcp/memory.d.ts"],
      declares: true,
      denied: "invalid_input",
    },
  });
  const ids = completedValue<{ ids: string[] }>(first).ids;
  expect(ids).toEqual(
    expect.arrayContaining(["core:host:read_file", "plugin:notes:notes_add", "client:app:select_file"]),
  );
  expect(ids.some((id) => id.startsWith("mcp:"))).toBe(false);
  expect(ids).not.toContain("core:host:admin_delete_everything");

  expect(second).toMatchObject({
    status: "waiting",
    reason: "pending_tools",
    output: [{ type: "text", text: "started" }],
  });
  const final = results.at(-1)!;
  expect(final).toMatchObject({
    status: "completed",
    value: { slow: "late value", grace: true },
    output: [{ type: "text", text: "after restore: late value" }],
  });

  // The trajectory shows every nested call under its parent exec or wait, and survives persistence.
  const persisted = JSON.parse(JSON.stringify(engine.exportTrajectory()));
  const tree = trajectoryTree(importTrajectory(persisted));
  expect(tree.map((control) => [control.tool, control.status])).toEqual([
    ["exec", "completed"],
    ["exec", "waiting"],
    ...tree.slice(2).map((control) => [control.tool, control.status]),
  ]);
  expect(tree.slice(2).every((control) => control.tool === "wait")).toBe(true);
  expect(tree[0]!.nested.map((call) => call.tool)).toEqual([
    "core:host:read_file",
    "client:app:select_file",
    "plugin:notes:notes_add",
    "mcp:memory:create_entities",
  ]);
  expect(tree[1]!.nested.map((call) => call.tool)).toEqual(["core:host:slow_echo"]);
  const readGraph = tree.slice(2).flatMap((control) => control.nested);
  expect(readGraph.map((call) => [call.tool, call.status, call.via])).toEqual([
    ["mcp:memory:read_graph", "completed", "mcp"],
  ]);
  expect(tree[1]!.codeModeRunId).toBe(waitingRunId(second));
  expect(() => importTrajectory({ format: "other", entries: [] })).toThrow("Not a codecell trajectory");

  // Completed: no snapshot left behind.
  expect(await (await engine.store).stats()).toMatchObject({ live: 0 });
  expect(engine.stats).toMatchObject({ execCount: 2 });
  await engine.close();
}, 60_000);

it("timeout, abort and expiry clean up the runtime state", async () => {
  const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 300, snapshotTtlSeconds: 2 } });
  const executor = new TestExecutor();
  const controller = new AbortController();
  const prepared = engine.prepareRun({
    ...options(executor),
    context: { ...context(), signal: controller.signal },
  });
  const store = await engine.store;
  const timedOut = await prepared.exec({ code: "while (true) {}" }, { toolCallId: "t1" });
  expect(timedOut).toMatchObject({ status: "failed", code: "timeout" });
  expect(await store.stats()).toMatchObject({ live: 0 });

  const expiring = await prepared.exec({ code: "await yield_control(); return 1" }, { toolCallId: "t2" });
  expect(await store.stats()).toMatchObject({ live: 1 });
  await new Promise((resolve) => setTimeout(resolve, 2100));
  expect(await prepared.wait({ runId: waitingRunId(expiring) }, { toolCallId: "t3" })).toMatchObject({
    code: "snapshot_expired",
  });
  expect(await store.stats()).toMatchObject({ live: 0 });

  const waiting = await prepared.exec(
    { code: "return await tools.slow_echo({ ms: 5000, value: 1 })" },
    { toolCallId: "t4" },
  );
  expect(waiting.status).toBe("waiting");
  expect(await store.stats()).toMatchObject({ live: 1 });
  controller.abort();
  // The abort frees the waiting run's snapshot as it propagates: wait for that, however busy the machine.
  await expect.poll(async () => (await store.stats()).live, { timeout: 10_000 }).toBe(0);
  expect(await prepared.wait({ runId: waitingRunId(waiting) }, { toolCallId: "t5" })).toMatchObject({
    code: "aborted",
  });
  await engine.close();
});
