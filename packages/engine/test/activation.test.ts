import { CodeModeError } from "@codecell/contract";
import { clearCodeModeNamespacesForTest } from "@codecell/namespaces";
import { createSandboxPool } from "@codecell/sandbox";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { assertCodeModePayload, createCodeModeEngine } from "../src/index.js";
import { completedValue, context, hostTools, registerNotesNamespace, TestExecutor } from "./support.js";

const engine = createCodeModeEngine({ config: { enabled: true } });
afterAll(() => engine.close());
afterEach(() => clearCodeModeNamespacesForTest());

const prepare = (overrides: Partial<Parameters<typeof engine.prepareRun>[0]> = {}, target = engine) =>
  target.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor(), ...overrides });

describe("activation", () => {
  it.each([
    ["absent", undefined],
    ["false", false],
    ["an object without enabled", { timeoutMs: 5000 }],
    ["enabled: false", { enabled: false }],
  ])("config %s leaves the tools unchanged", async (_name, config) => {
    const disabled = createCodeModeEngine({ config });
    const run = prepare({}, disabled);
    expect(run.active).toBe(false);
    expect(run.reason).toBe("disabled");
    expect(run.modelTools.map((tool) => tool.name)).toEqual(hostTools.map((tool) => tool.name));
    expect(run.modelTools[0]).toEqual({
      name: "read_file",
      description: hostTools[0]!.description,
      inputSchema: hostTools[0]!.parameters,
    });
    await expect(run.exec({ code: "return 1" }, { toolCallId: "t" })).rejects.toThrow(
      "Code mode is disabled",
    );
    await disabled.close();
  });

  it.each([
    ["no tools", { tools: [] }],
    ["disableTools", { disableTools: true }],
    ["an empty allow list", { allow: [] }],
  ])("a run with %s does not activate code mode", (_name, overrides) => {
    const run = prepare(overrides);
    expect(run.active).toBe(false);
    expect(run.reason).toBe("no_tools");
    expect(run.modelTools.some((tool) => tool.name === "exec" && tool.description.includes("sandbox"))).toBe(
      false,
    );
  });

  it("shows the model exactly exec and wait, plus directOnly tools", () => {
    const run = prepare();
    expect(run.active).toBe(true);
    expect(run.modelTools.map((tool) => tool.name)).toEqual(["exec", "wait", "message"]);
    const [exec, wait] = run.modelTools;
    expect(exec!.inputSchema).toMatchObject({ type: "object", properties: { code: { type: "string" } } });
    expect(wait!.inputSchema).toMatchObject({ required: ["runId"] });
    expect(() =>
      assertCodeModePayload(
        run.modelTools.map((tool) => tool.name),
        ["message"],
      ),
    ).not.toThrow();
  });

  it("the exec description mentions MCP only when an MCP server is visible", () => {
    const withoutMcp = prepare().modelTools[0]!.description;
    expect(withoutMcp).not.toContain("MCP");
    const mcpTool = {
      name: "read_graph",
      description: "Read the graph",
      parameters: { type: "object" },
      source: "mcp" as const,
      owner: "memory",
    };
    const withMcp = prepare({
      tools: [...hostTools, mcpTool],
      mcpServers: [
        {
          name: "memory",
          tools: [{ name: "read_graph", inputSchema: { type: "object" } }],
          resources: false,
          prompts: false,
        },
      ],
    }).modelTools[0]!.description;
    expect(withMcp).toContain("MCP servers (memory)");
    expect(withMcp).toContain('API.read("mcp/<server>.d.ts")');
    // Denied by policy: the server has no visible tool left, so it is not mentioned.
    const denied = prepare({
      tools: [...hostTools, mcpTool],
      deny: ["mcp:memory:*"],
      mcpServers: [
        {
          name: "memory",
          tools: [{ name: "read_graph", inputSchema: { type: "object" } }],
          resources: false,
          prompts: false,
        },
      ],
    }).modelTools[0]!.description;
    expect(denied).not.toContain("MCP");
  });

  it("appends a namespace's description and prompt only when its tools are visible", () => {
    registerNotesNamespace();
    expect(prepare().modelTools[0]!.description).toContain("Use Notes.list(tag?)");
    expect(prepare({ deny: ["notes_add"] }).modelTools[0]!.description).not.toContain("Notes");
  });

  it("keeps the hidden catalog's control names out (and a core shell exec in)", async () => {
    const run = prepare();
    const result = await run.exec({ code: "return ALL_TOOLS.map((tool) => tool.id)" }, { toolCallId: "t1" });
    expect(result).toMatchObject({ status: "completed" });
    const ids = completedValue<string[]>(result);
    expect(ids).toContain("core:host:exec");
    expect(ids).not.toContain("core:host:wait");
    expect(ids).not.toContain("core:host:tool_search");
    expect(ids).not.toContain("core:host:message");
  });

  it("hook metadata tells a code-mode exec from a shell exec", () => {
    const run = prepare();
    expect(run.hookMetadata({ code: "1" })).toEqual({
      toolKind: "code_mode_exec",
      toolInputKind: "javascript",
    });
    expect(run.hookMetadata({ code: "1", language: "typescript" })).toEqual({
      toolKind: "code_mode_exec",
      toolInputKind: "typescript",
    });
  });
});

describe("assertCodeModePayload", () => {
  it.each([
    [["exec", "wait"], null],
    [["exec", "wait", "read_file"], "unexpected tools read_file"],
    [["exec"], "missing wait"],
    [["exec", "wait", "wait"], "duplicated wait"],
  ])("%j", (names, problem) => {
    if (problem === null) expect(() => assertCodeModePayload(names)).not.toThrow();
    else expect(() => assertCodeModePayload(names)).toThrow(problem);
  });
});

describe("failing closed", () => {
  it("a bad config is invalid_config when the engine is created", () => {
    let caught: unknown;
    try {
      createCodeModeEngine({ config: { enabled: true, timeoutMS: 5 } });
    } catch (error) {
      caught = error;
    }
    expect(CodeModeError.is(caught) && caught.code).toBe("invalid_config");
  });

  it("QuickJS that cannot load fails every run with runtime_unavailable and never exposes tools", async () => {
    const pool = createSandboxPool({ size: 1, wasm: new URL("file:///nonexistent/quickjs.wasm") });
    const broken = createCodeModeEngine({ config: true, pool });
    const run = prepare({}, broken);
    expect(run.modelTools.map((tool) => tool.name)).toEqual(["exec", "wait", "message"]);
    const result = await run.exec({ code: "return 1" }, { toolCallId: "t" });
    expect(result).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    await broken.close();
    await pool.close();
  });
});
