// Points of the code-mode spec, one describe per point; each quotes the spec line it proves, translated.
// The checklist of these points, in prose, is spec-conformance.md beside this file: keep the two in step.
import { CodeModeError } from "@codecell/contract";
import {
  clearCodeModeNamespacesForPlugin,
  clearCodeModeNamespacesForTest,
  createCodeModeNamespaceTool,
  registerCodeModeNamespaceForPlugin,
} from "@codecell/namespaces";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import {
  completedValue,
  context,
  failedError,
  hostTools,
  registerNotesNamespace,
  TestExecutor,
  waitingRunId,
} from "./support.js";

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
    const runId = waitingRunId(first);
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

describe('spec "Error codes": nested_tool_failed when a nested tool fails', () => {
  // Spec, section "Error codes" lists nested_tool_failed for a failed nested call; section "Security
  // boundary": host errors become plain guest errors. Limit codes (timeout, memory, output, snapshot)
  // are the runtime's: a tool that throws one must not pass for a limit.
  class CodeThrowingExecutor extends TestExecutor {
    override async callTool(call: Parameters<TestExecutor["callTool"]>[0]): Promise<unknown> {
      if (call.tool.name === "fail_always") throw new CodeModeError("timeout", "the disk is slow today");
      if (call.tool.name === "read_file") throw new CodeModeError("invalid_input", "no such file: a.txt");
      return super.callTool(call);
    }
  }

  it("turns a tool's own CodeModeError into nested_tool_failed with the tool's message", async () => {
    const engine = newEngine();
    const { exec } = setup(engine, { executor: new CodeThrowingExecutor() });
    const caught = await exec(`
      const seen = [];
      for (const name of ["fail_always", "read_file"]) {
        try { await tools[name]({ path: "a.txt" }); } catch (error) { seen.push([error.code, error.message]); }
      }
      return seen;
    `);
    expect(caught).toMatchObject({
      status: "completed",
      value: [
        ["nested_tool_failed", "Tool core:host:fail_always failed: the disk is slow today"],
        ["nested_tool_failed", "Tool core:host:read_file failed: no such file: a.txt"],
      ],
    });
  });

  it("fails an uncaught tool error as nested_tool_failed, never as the tool's limit code", async () => {
    const engine = newEngine();
    const { exec } = setup(engine, { executor: new CodeThrowingExecutor() });
    const result = await exec("return await tools.fail_always({})");
    expect(result).toMatchObject({ status: "failed", code: "nested_tool_failed" });
    expect(result.telemetry.limitFailures.timeout).toBe(0);
    const entry = engine.exportTrajectory().entries.find((item) => item.kind === "nested");
    expect(entry).toMatchObject({ status: "failed", code: "nested_tool_failed" });
  });
});

describe('spec "Guest runtime API": yield_control(reason)', () => {
  // Spec, section "Guest runtime API": `declare function yield_control(reason?: string): Promise<void>`,
  // and a waiting result with reason "yield" when the guest gives control back. The reason is the
  // guest's message to the model and to whoever reads the transcript.
  it("puts the reason in the waiting result and in the trajectory's control entry", async () => {
    const engine = newEngine();
    const { exec, wait } = setup(engine);
    const first = await exec(`await yield_control("need the user's answer first"); return 2;`);
    expect(first).toMatchObject({
      status: "waiting",
      reason: "yield",
      yieldReason: "need the user's answer first",
    });
    const control = engine.exportTrajectory().entries.find((entry) => entry.kind === "control");
    expect(control).toMatchObject({ status: "waiting", yieldReason: "need the user's answer first" });
    expect(await wait(waitingRunId(first))).toMatchObject({ status: "completed", value: 2 });
  });

  it("leaves yieldReason out when the guest gave none, and bounds a long one", async () => {
    const engine = newEngine();
    const { exec } = setup(engine);
    const bare = await exec("await yield_control(); return 1;");
    expect(bare).toMatchObject({ status: "waiting", reason: "yield" });
    expect(bare).not.toHaveProperty("yieldReason");
    const long = await exec(`await yield_control("x".repeat(5000)); return 1;`);
    expect((long as { yieldReason: string }).yieldReason).toHaveLength(500);
  });
});

describe('spec "Activation": only if tools are active for the run', () => {
  // Spec, section "Activation": "If enabled and tools are active for the run, register the effective
  // tools in the code-mode catalog"; runs with no tools (raw model calls, disableTools, an empty allow
  // list) do not activate the code-mode surface. Policy applies first, so a policy that leaves nothing
  // is such a run too.
  it.each([
    ["deny everything", { deny: ["*"] }],
    ["an allow list that matches nothing", { allow: ["no_such_tool"] }],
    ["an allow list of denied tools", { allow: ["read_file"], deny: ["read_file"] }],
  ])("passes through with %s: no exec and wait over an empty catalog", async (_case, policy) => {
    const engine = newEngine();
    const { run } = setup(engine, policy);
    expect(run.active).toBe(false);
    expect(run.reason).toBe("no_tools");
    expect(run.modelTools).toEqual([]);
    await expect(run.exec({ code: "return 1" }, { toolCallId: "x" })).rejects.toMatchObject({
      code: "invalid_input",
    });
  });

  it("keeps what policy left visible when only directOnly tools remain", () => {
    const engine = newEngine();
    const { run } = setup(engine, { allow: ["message"] });
    expect(run.active).toBe(false);
    expect(run.modelTools.map((tool) => tool.name)).toEqual(["message"]);
  });

  it("activates as soon as one catalogued tool is left", () => {
    const engine = newEngine();
    const { run } = setup(engine, { allow: ["read_file"] });
    expect(run.active).toBe(true);
    expect(run.modelTools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
  });
});

describe('spec "Configuration": languages', () => {
  // Spec, section "Configuration": "languages: array of "javascript" and "typescript"; default both."
  // The exec schema a model sees offers only what the config enables.
  it("leaves typescript out of the exec schema when only javascript is enabled", () => {
    const engine = newEngine({ languages: ["javascript"] });
    const { run } = setup(engine);
    const schema = run.modelTools[0]!.inputSchema as { properties: { language: { enum: string[] } } };
    expect(schema.properties.language.enum).toEqual(["javascript"]);
    expect(JSON.stringify(run.modelTools[0])).not.toMatch(/typescript/i);
  });

  it("offers both languages by default", () => {
    const { run } = setup(newEngine());
    const schema = run.modelTools[0]!.inputSchema as { properties: { language: { enum: string[] } } };
    expect(schema.properties.language.enum).toEqual(["javascript", "typescript"]);
  });

  // Spec, "Tool catalog": the guest views ALL_TOOLS, tools.search/describe/call leave MCP entries out.
  it("says in the exec description that ALL_TOOLS and tools.* leave MCP tools out", () => {
    const { run } = setup(newEngine(), {
      tools: [
        ...hostTools,
        { name: "search", description: "Search.", parameters: {}, source: "mcp", owner: "docs" },
      ],
      mcpServers: [
        {
          name: "docs",
          tools: [{ name: "search", description: "Search.", inputSchema: {} }],
          resources: false,
          prompts: false,
        },
      ],
    });
    expect(run.modelTools[0]!.description).toContain("every tool except MCP tools");
  });
});

describe('spec "Tool catalog": the catalog omits code mode\'s control tools, nothing else', () => {
  // Spec, section "Tool catalog": "The catalog omits code-mode control tools: exec, wait,
  // tool_search_code, tool_search, tool_describe, tool_call. This prevents recursion." Section "Tool
  // names and collisions": the host's shell exec is hidden from the model "and catalogued like any other
  // tool". So every name but exec is left out by name (unmarked host, plugin and client tools too); the
  // code-mode exec by its mark.
  const namesakes = [
    { name: "wait", description: "The plugin's own wait.", parameters: {}, source: "plugin", owner: "timer" },
    { name: "tool_search", description: "A search.", parameters: {}, source: "plugin", owner: "timer" },
    { name: "tool_search_code", description: "A search.", parameters: {}, source: "core", owner: "host2" },
    { name: "tool_describe", description: "A describe.", parameters: {}, source: "client", owner: "app" },
    { name: "tool_call", description: "A call.", parameters: {}, source: "core", owner: "host2" },
    { name: "ping", description: "Answers pong.", parameters: {}, source: "plugin", owner: "timer" },
  ] as const;

  it("leaves every control name but exec out of ALL_TOOLS, tools.* and tools.call, and keeps the shell exec", async () => {
    const engine = newEngine();
    const { exec, executor } = setup(engine, { tools: [...hostTools, ...namesakes] });
    const original = executor.callTool.bind(executor);
    executor.callTool = async (call) => (call.tool.owner === "timer" ? { ran: call.toolId } : original(call));
    const result = await exec(`
      const refused = [];
      for (const id of ["plugin:timer:wait", "plugin:timer:tool_search", "core:host2:tool_search_code",
          "client:app:tool_describe", "core:host2:tool_call", "tool_search", "wait"]) {
        try { await tools.call(id, {}); } catch (error) { refused.push(error.code); }
      }
      return {
        names: ALL_TOOLS.map((t) => t.name).filter((n) => n === "exec" || n === "wait" || n.startsWith("tool_")),
        shortcuts: ["wait", "tool_search", "tool_search_code", "tool_describe", "tool_call"].filter((n) => n in tools),
        searched: (await tools.search("tool search describe call wait", { limit: 50 })).map((t) => t.name),
        refused,
        shell: await tools.call("core:host:exec", { command: "ls" }),
        ping: await tools.ping({}),
      };`);
    const value = completedValue<{
      names: string[];
      shortcuts: string[];
      searched: string[];
      refused: string[];
      shell: unknown;
      ping: unknown;
    }>(result);
    expect(value.names).toEqual(["exec"]);
    expect(value.shortcuts).toEqual([]);
    expect(value.searched.filter((name) => name === "wait" || name.startsWith("tool_"))).toEqual([]);
    expect(value.refused).toEqual(Array(7).fill("invalid_input"));
    expect(value.shell).toEqual({ stdout: "ran ls", exitCode: 0 });
    expect(value.ping).toEqual({ ran: "plugin:timer:ping" });
  });

  it("never catalogues the engine's own exec and wait, even when a host feeds them back in as tools", () => {
    const engine = newEngine();
    const { run } = setup(engine);
    const surface = run.modelTools.filter((tool) => tool.name === "exec" || tool.name === "wait");
    expect(surface).toHaveLength(2);
    const fedBack = surface.map((tool) => ({
      ...tool,
      parameters: tool.inputSchema,
      source: "core" as const,
      owner: "host2",
    }));
    const again = setup(engine, { tools: [...fedBack, hostTools[0]!] }).run as unknown as {
      catalog: { entries: Array<{ id: string }> };
    };
    expect(again.catalog.entries.map((entry) => entry.id)).toEqual(["core:host:read_file"]);
  });

  // Spec, "Validation checklist": "disabled configuration leaves the existing tool exposure unchanged".
  it("passes every tool through unchanged with code mode off, control names and marked tools included", () => {
    const engine = createCodeModeEngine({ config: false });
    engines.push(engine);
    const tools = [...hostTools, ...namesakes];
    const { run } = setup(engine, { tools });
    expect(run.active).toBe(false);
    expect(run.modelTools.map((tool) => tool.name)).toEqual(tools.map((tool) => tool.name));
  });
});

describe('spec "Activation": policy applies before code mode, also to what passes through', () => {
  // Spec, "Activation": "Apply allow and deny policies. If tools.codeMode.enabled is false, continue with
  // normal tool exposure." And "Validation checklist": "denied tools do not appear"; raw runs, disableTools
  // and empty allow lists keep code mode out. A host that shows modelTools as they come exposes exactly
  // what policy left, whichever way the run is inactive.
  const all = hostTools.map((tool) => tool.name);
  const policies = [
    [
      "deny by id",
      { deny: ["core:host:admin_delete_everything"] },
      all.filter((n) => n !== "admin_delete_everything"),
    ],
    ["deny by glob", { deny: ["core:*"] }, ["notes_list", "notes_add", "select_file"]],
    ["an allow list", { allow: ["read_file", "plugin:notes:*"] }, ["read_file", "notes_list", "notes_add"]],
    [
      "allow and deny",
      { allow: ["*"], deny: ["select_file", "message"] },
      all.filter((n) => n !== "select_file" && n !== "message"),
    ],
  ] as const;

  it.each(policies)(
    "code mode off, %s: modelTools hold exactly the allowed tools",
    (_case, policy, names) => {
      const engine = createCodeModeEngine({ config: false });
      engines.push(engine);
      const { run } = setup(engine, policy);
      expect(run.active).toBe(false);
      expect(run.modelTools.map((tool) => tool.name)).toEqual(names);
    },
  );

  it.each([
    ["disableTools, code mode on", { enabled: true }, { disableTools: true }],
    ["disableTools, code mode off", false, { disableTools: true }],
    ["an empty allow list, code mode on", { enabled: true }, { allow: [] }],
    ["an empty allow list, code mode off", false, { allow: [] }],
  ] as const)("%s: no tool reaches the model", (_case, config, overrides) => {
    const engine = createCodeModeEngine({ config });
    engines.push(engine);
    const { run } = setup(engine, overrides);
    expect(run.active).toBe(false);
    expect(run.modelTools).toEqual([]);
  });
});

describe('spec "Nested tool execution": the trajectory shows nested calls under the run the model was given', () => {
  // Spec, "Nested tool execution": "Nested calls are projected into the transcript as real tool calls
  // ... The projection identifies the parent code-mode tool call and the nested tool id." And "E2E test
  // plan": "Export the trajectory and ensure nested calls are visible under the parent code-mode call."
  it("records exec's and wait's nested calls under the runId of the waiting result; the executor sees that id in both", async () => {
    const engine = newEngine({ timeoutMs: 400 });
    const { exec, wait, executor } = setup(engine);
    const first = await exec(`
      const fast = await tools.read_file({ path: "a" });
      const slow = await tools.slow_echo({ ms: 1200, value: "late" });
      return [fast.path, slow, (await tools.read_file({ path: "b" })).path];`);
    const runId = waitingRunId(first);
    let result = await wait(runId);
    while (result.status === "waiting") result = await wait(runId);
    expect(result).toMatchObject({ status: "completed", value: ["a", "late", "b"] });

    expect(new Set(executor.calls.map((call) => call.parent.codeModeRunId))).toEqual(new Set([runId]));
    const { entries } = engine.exportTrajectory({ codeModeRunId: runId });
    const execEntry = entries.find((entry) => entry.tool === "exec")!;
    expect(execEntry).toMatchObject({ kind: "control", codeModeRunId: runId, status: "waiting" });
    const nested = entries.filter((entry) => entry.kind === "nested");
    expect(nested.map((entry) => entry.tool)).toEqual([
      "core:host:read_file",
      "core:host:slow_echo",
      "core:host:read_file",
    ]);
    // The first two ran during exec, the last during a wait: each under its own parent call.
    expect(nested[0]!.parentToolCallId).toBe(execEntry.toolCallId);
    const waits = entries.filter((entry) => entry.tool === "wait");
    expect(waits.length).toBeGreaterThan(0);
    expect(waits.map((entry) => entry.toolCallId)).toContain(nested[2]!.parentToolCallId);
  });

  // The promise tested here: the exec control entry records the cell, so a transcript can be replayed.
  it("records the cell's code on the exec entry, through the same redaction hook as inputs", async () => {
    const seen: string[] = [];
    const engine = newEngine(
      {},
      {
        redactInput: (toolId: string, input: Record<string, unknown>) => {
          seen.push(toolId);
          return toolId === "exec" ? { ...input, code: String(input.code).replace("hunter2", "***") } : input;
        },
      },
    );
    const { exec } = setup(engine);
    const code = 'const password = "hunter2"; return (await tools.read_file({ path: "a" })).path;';
    await exec(code);
    const control = engine.exportTrajectory().entries.find((entry) => entry.kind === "control")!;
    expect(control.input).toEqual({ language: "javascript", code: code.replace("hunter2", "***") });
    expect(seen).toEqual(["exec", "core:host:read_file"]);
  });
});

describe("trajectory bounds: per session, capped in bytes, freed with the session", () => {
  it("keeps many large inputs under the session's byte cap, each truncated with a marker", async () => {
    const engine = newEngine(
      { timeoutMs: 30_000 },
      { trajectory: { maxBytesPerSession: 256 * 1024, maxInputBytes: 8 * 1024 } },
    );
    const { exec } = setup(engine);
    // 40 inputs of 200 KB: 8 MB that an unbounded trajectory would keep.
    const result = await exec(`
      const big = "x".repeat(200000);
      for (let i = 0; i < 40; i++) await tools.call("core:host:slow_echo", { ms: 0, value: i, path: big });
      return "done";`);
    expect(result).toMatchObject({ status: "completed", value: "done" });
    const exported = engine.exportTrajectory({ sessionId: "session-1" });
    expect(JSON.stringify(exported).length).toBeLessThan(256 * 1024);
    expect(engine.trajectoryStats.bytes).toBeLessThanOrEqual(256 * 1024);
    const nested = exported.entries.filter((entry) => entry.kind === "nested");
    expect(nested.length).toBe(40);
    for (const entry of nested) {
      const marker = (entry.input as { $truncated: { bytes: number; preview: string } }).$truncated;
      expect(marker.bytes).toBeGreaterThan(200_000);
      expect(marker.preview).toMatch(/^\{"ms":0,"value":\d+,"path":"xxx/);
      expect(marker.preview.length).toBeLessThanOrEqual(512);
    }
  });

  it("drops a session's oldest entries first when its log is full", async () => {
    const engine = newEngine({}, { trajectory: { maxBytesPerSession: 16 * 1024, maxInputBytes: 1024 } });
    const { exec } = setup(engine);
    await exec(`for (let i = 0; i < 200; i++) await tools.read_file({ path: "f" + i }); return 1;`);
    const nested = engine.exportTrajectory({ sessionId: "session-1" }).entries;
    expect(nested.length).toBeLessThan(200);
    expect(nested.at(-1)).toMatchObject({ tool: "core:host:read_file", input: { path: "f199" } });
    expect(engine.trajectoryStats.bytes).toBeLessThanOrEqual(16 * 1024);
  });

  it("never shows one session another's entries, and frees a session's entries when it ends", async () => {
    const engine = newEngine();
    const executor = new TestExecutor();
    const runFor = (sessionId: string) =>
      engine.prepareRun({ tools: hostTools, context: context({ sessionId }), executor });
    await runFor("A").exec({ code: 'return tools.read_file({ path: "secret-of-A" })' }, { toolCallId: "a1" });
    await runFor("B").exec({ code: 'return tools.read_file({ path: "of-B" })' }, { toolCallId: "b1" });
    const ofB = JSON.stringify(engine.exportTrajectory({ sessionId: "B" }));
    expect(ofB).toContain("of-B");
    expect(ofB).not.toContain("secret-of-A");
    expect(engine.trajectoryStats.sessions).toBe(2);
    const before = engine.trajectoryStats.bytes;

    await engine.endSession("A");
    expect(engine.exportTrajectory({ sessionId: "A" }).entries).toEqual([]);
    expect(JSON.stringify(engine.exportTrajectory())).not.toContain("secret-of-A");
    expect(engine.trajectoryStats.sessions).toBe(1);
    expect(engine.trajectoryStats.bytes).toBeLessThan(before);
    expect(engine.forgetTrajectory("B")).toBe(true);
    expect(engine.trajectoryStats).toEqual({ sessions: 0, bytes: 0 });
  });

  it("frees the sessions idle longest when all sessions together pass the total cap", async () => {
    const engine = newEngine(
      {},
      { trajectory: { maxBytesPerSession: 64 * 1024, maxInputBytes: 16 * 1024, maxTotalBytes: 100 * 1024 } },
    );
    const executor = new TestExecutor();
    for (const sessionId of ["S1", "S2", "S3"]) {
      const run = engine.prepareRun({ tools: hostTools, context: context({ sessionId }), executor });
      await run.exec(
        {
          code: `for (let i = 0; i < 5; i++) await tools.read_file({ path: "y".repeat(9000) + i }); return 1;`,
        },
        { toolCallId: `${sessionId}-1` },
      );
    }
    expect(engine.trajectoryStats.bytes).toBeLessThanOrEqual(100 * 1024);
    expect(engine.exportTrajectory({ sessionId: "S1" }).entries).toEqual([]);
    expect(engine.exportTrajectory({ sessionId: "S3" }).entries.length).toBe(6);
  });
});

describe('spec "Virtual API": API.list rejects unknown prefixes and ./.. segments like API.read', () => {
  // Spec, section "Virtual API files": "Guest code sees only the API object: API.list(prefix?) returns file
  // metadata and API.read(path) returns the selected declaration content. Unknown paths and . / ..
  // segments are rejected."
  it("rejects a prefix that names no directory or file, naming the valid prefixes", async () => {
    const { exec } = setup(newEngine());
    const result = await exec('return await API.list("nope")');
    expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(failedError(result)).toContain(
      'API.list: there is no directory or file "nope"; valid prefixes are "mcp", "mcp/index.d.ts", and API.list() lists every file',
    );
  });

  it.each([["mcp//"], ["mcp/./"], ["mcp/.."], ["./mcp"], ["/mcp"], ["mcp//index.d.ts"], ["/"]])(
    "rejects API.list(%j) with invalid_input, as API.read does",
    async (prefix) => {
      const { exec } = setup(newEngine());
      const cell = `const outcomes = [];
        for (const call of [() => API.list(${JSON.stringify(prefix)}), () => API.read(${JSON.stringify(prefix)})]) {
          try { await call(); outcomes.push("accepted"); } catch (error) { outcomes.push(error.code); }
        }
        return outcomes;`;
      expect(await exec(cell)).toMatchObject({
        status: "completed",
        value: ["invalid_input", "invalid_input"],
      });
    },
  );

  it("still lists everything with no prefix or an empty one, and a directory with one trailing slash", async () => {
    const { exec } = setup(newEngine());
    const result = await exec(
      'const paths = async (prefix) => (await API.list(prefix)).map((file) => file.path); return [await paths(), await paths(""), await paths("mcp"), await paths("mcp/"), await paths("mcp/index.d.ts")]',
    );
    const all = ["mcp/index.d.ts"];
    expect(result).toMatchObject({ status: "completed", value: [all, all, all, all, all] });
  });
});

describe('spec "Internal namespaces": scopes per exec, and a cleared plugin leaves no stale globals', () => {
  // Spec, "Registry lifecycle": "Each visible namespace calls createScope(ctx) for the current run" and
  // "Plugin rollback or uninstall calls clearCodeModeNamespacesForPlugin(pluginId) so stale globals do not
  // outlive a failed plugin load." A run is prepared once per session by hosts such as the gateway, so
  // scopes are built for each exec (and wait), never only once per prepareRun.
  afterEach(() => clearCodeModeNamespacesForTest());

  it("builds the scope for each exec, and drops the namespace from runs prepared before the plugin was cleared", async () => {
    let scopes = 0;
    registerCodeModeNamespaceForPlugin("notes", {
      id: "notes",
      globalName: "Notes",
      description: "Personal notes.",
      requiredToolNames: ["notes_list"],
      createScope: () => {
        scopes++;
        return { list: createCodeModeNamespaceTool("notes_list"), built: scopes };
      },
    });
    const engine = newEngine();
    const { exec, executor } = setup(engine);
    const before = scopes;
    const first = await exec("return [Notes.built, (await Notes.list({})).length]");
    const second = await exec("return [Notes.built, (await namespaces.Notes.list({})).length]");
    expect(first).toMatchObject({ status: "completed", value: [before + 1, 1] });
    expect(second).toMatchObject({ status: "completed", value: [before + 2, 1] });

    clearCodeModeNamespacesForPlugin("notes");
    const after = await exec(
      'return [typeof Notes, typeof namespaces.Notes, ALL_TOOLS.some((t) => t.id === "plugin:notes:notes_list")]',
    );
    // The namespace is gone; the plugin's tool itself is still in the catalog the run was prepared with.
    expect(after).toMatchObject({ status: "completed", value: ["undefined", "undefined", true] });
    expect(executor.calls.filter((call) => call.via === "namespace")).toHaveLength(2);
  });

  it("refuses a call through the global a suspended VM still holds once the plugin is cleared", async () => {
    registerNotesNamespace();
    const engine = newEngine({ timeoutMs: 300 });
    const { exec, wait, executor } = setup(engine);
    const first = await exec(`
      await tools.slow_echo({ ms: 900, value: 1 });
      try { return await Notes.list(); } catch (error) { return { code: error.code, message: error.message }; }`);
    const runId = waitingRunId(first);
    clearCodeModeNamespacesForPlugin("notes");
    let result = await wait(runId);
    while (result.status === "waiting") result = await wait(runId);
    expect(result).toMatchObject({ status: "completed", value: { code: "invalid_input" } });
    expect(completedValue<{ message: string }>(result).message).toMatch(/Unknown namespace "notes"/);
    expect(executor.calls.filter((call) => call.via === "namespace")).toEqual([]);
  });
});
