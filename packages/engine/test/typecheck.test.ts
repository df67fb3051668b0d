import type { McpConnector } from "@codecell/mcp-connector";
import { clearCodeModeNamespacesForTest } from "@codecell/namespaces";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { context, hostTools, registerNotesNamespace, startMemoryServer, TestExecutor } from "./support.js";

let memory: Awaited<ReturnType<typeof startMemoryServer>>;
let mcp: McpConnector;
const engines = {
  off: createCodeModeEngine({ config: { enabled: true } }),
  warn: createCodeModeEngine({ config: { enabled: true, typecheck: "warn" } }),
  strict: createCodeModeEngine({ config: { enabled: true, typecheck: "strict" } }),
  // A check can never finish in 1 ms: the first one waits for a new thread to load the compiler.
  strictUnfinished: createCodeModeEngine({
    config: { enabled: true, typecheck: "strict", typecheckTimeoutMs: 1 },
  }),
  warnUnfinished: createCodeModeEngine({
    config: { enabled: true, typecheck: "warn", typecheckTimeoutMs: 1 },
  }),
};

beforeAll(async () => {
  memory = await startMemoryServer();
  mcp = memory.mcp;
  registerNotesNamespace();
});

afterAll(async () => {
  clearCodeModeNamespacesForTest();
  for (const engine of Object.values(engines)) await engine.close();
  await memory?.close();
});

function setup(engine: CodeModeEngine) {
  const executor = new TestExecutor();
  executor.mcp = mcp;
  const run = engine.prepareRun({
    tools: [...hostTools, ...mcp.hostTools()],
    mcpServers: mcp.describeServers(),
    context: context(),
    executor,
  });
  return { run, executor };
}

// Side effects first, then the mistake: without the check the first call is made before the cell fails.
const misspelt = `const file = await tools.read_file({ path: "README.md" });
await MCP.memory.createEntities({
  entities: [{ name: "codecell", entityType: "project", observation: [file.content] }],
});
return "done";`;

const everything = `const hits = await tools.search("read a file", { limit: 2 });
const described = await tools.describe(hits[0].id);
const file = await tools.read_file({ path: "notes.txt" });
const echoed = await tools.call(ALL_TOOLS.find((tool) => tool.name === "slow_echo").id, { ms: 1, value: 7 });
await MCP.memory.create_entities({
  entities: [{ name: "checked", entityType: "test", observations: [file.content] }],
});
const found = await MCP.memory.searchNodes({ query: "checked" });
const entities = found.structuredContent?.entities ?? [];
const index = await API.read("mcp/index.d.ts");
const notes = await Notes.list("home");
await namespaces.Notes.add("typed", "work");
const count = await Notes.nested.count();
text(\`\${entities.length} entities, \${index.length > 0}\`);
json({ schema: described.parameters, echoed });
console.info(notes.length, count.length);
return { names: entities.map((entity) => entity.name), hits: hits.length };`;

describe("typecheck strict", () => {
  it("refuses a cell with a misspelt MCP argument before any nested call", async () => {
    const { run, executor } = setup(engines.strict);
    const result = await run.exec({ code: misspelt }, { toolCallId: "s1" });
    expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
    if (result.status !== "failed") return;
    expect(result.error).toMatch(/1 type error .*did not run.*cell\.ts:3:57 TS2561 .*'observations'/);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({
        file: "cell.ts",
        line: 3,
        column: 57,
        code: "TS2561",
        accepts: ["name", "entityType", "observations"],
      }),
    ]);
    expect(executor.calls).toEqual([]);
    expect(result.telemetry.nested.calls).toBe(0);
  });

  it("runs a correct cell that uses every guest global, with no diagnostics", async () => {
    const { run } = setup(engines.strict);
    const result = await run.exec({ code: everything }, { toolCallId: "s2" });
    expect(result).toMatchObject({ status: "completed", value: { names: ["checked"] } });
    expect(result).not.toHaveProperty("diagnostics");
  });

  it("checks TypeScript cells, also one sent without the language", async () => {
    const { run, executor } = setup(engines.strict);
    const typed = await run.exec(
      {
        code: 'const file: { path: string } = await tools.read_file({ path: "a" });\nconst size: number = file.path;\nreturn size;',
        language: "typescript",
      },
      { toolCallId: "s3" },
    );
    expect(typed).toMatchObject({
      status: "failed",
      code: "invalid_input",
      diagnostics: [{ line: 2, column: 7, code: "TS2322" }],
    });
    const detected = await run.exec(
      { code: "const n: number = await tools.read_file({ path: 1 });\nreturn n;" },
      { toolCallId: "s4" },
    );
    expect(detected).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(detected.telemetry.detectedLanguage).toBe("typescript");
    expect(executor.calls).toEqual([]);
  });

  it("leaves a cell that fails its own checks to them", async () => {
    const { run } = setup(engines.strict);
    const result = await run.exec({ code: 'import fs from "node:fs";' }, { toolCallId: "s5" });
    expect(result).toMatchObject({ status: "failed", code: "module_access_denied" });
    expect(result).not.toHaveProperty("diagnostics");
  });

  it("says so in the exec description, and only in strict mode", () => {
    const description = (engine: CodeModeEngine) =>
      setup(engine).run.modelTools.find((tool) => tool.name === "exec")!.description;
    expect(description(engines.strict)).toMatch(/type-checked .* before they run/);
    expect(description(engines.warn)).not.toMatch(/type-checked/);
    expect(description(engines.off)).not.toMatch(/type-checked/);
  });
});

// Cells as models write them from the exec description and the READMEs: each uses what the runtime
// really returns, so "strict" must run it; each wrong twin reads what the runtime does not return, so
// "strict" must refuse it before anything runs.
const asModelsWrite: Array<[string, string, string, RegExp]> = [
  [
    "tools.describe's parameters",
    `const d = await tools.describe("read_file");
return { required: d.parameters.required, props: Object.keys(d.parameters.properties), id: d.id, out: d.outputSchema };`,
    `const d = await tools.describe("read_file");
return d.inputSchema.required;`,
    /'inputSchema' does not exist/,
  ],
  [
    "API.search's call and signature",
    `const hits = await API.search("create entities", { limit: 3 });
return hits.map((hit) => [hit.call, hit.signature, hit.description, hit.server, hit.tool]).concat([[hits[0].call]]);`,
    `const hits = await API.search("create entities");
return hits[0].id;`,
    /'id' does not exist/,
  ],
  [
    "the search shapes models bring from other APIs",
    `const a = await tools.search({ query: "read", limit: 2 });
const b = await tools.search("read", 2);
const c = await API.search({ query: "entities" });
const d = await API.search("entities", 1);
return [a[0].id, b[0].sourceName, c[0].call, d.length];`,
    `const a = await tools.search({ q: "read" });
return a;`,
    /'q' does not exist|No overload/,
  ],
  [
    "ALL_TOOLS entries",
    `return ALL_TOOLS.filter((t) => t.source === "core").map((t) => [t.id, t.name, t.description, t.sourceName, t.label]);`,
    `return ALL_TOOLS.map((t) => t.parameters);`,
    /'parameters' does not exist/,
  ],
  [
    "API.list files",
    `const files = await API.list("mcp");
return files.map((f) => \`\${f.path} \${f.bytes} \${f.description}\`);`,
    `const files = await API.list("mcp");
return files.map((f) => f.content);`,
    /'content' does not exist/,
  ],
];

describe("typecheck strict: cells as models write them", () => {
  it.each(asModelsWrite)("runs a cell that reads %s", async (_what, right) => {
    const { run } = setup(engines.strict);
    const result = await run.exec({ code: right }, { toolCallId: "m-right" });
    expect(result, JSON.stringify(result.status === "failed" ? result : result.status)).toMatchObject({
      status: "completed",
    });
    expect(result).not.toHaveProperty("diagnostics");
  });

  it.each(asModelsWrite)(
    "refuses the wrong twin of %s before it runs",
    async (_what, _right, wrong, message) => {
      const { run, executor } = setup(engines.strict);
      const result = await run.exec({ code: wrong }, { toolCallId: "m-wrong" });
      expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(result.diagnostics?.map((d) => d.message).join("\n")).toMatch(message);
      expect(executor.calls).toEqual([]);
    },
  );
});

describe("typecheck warn", () => {
  it("runs the cell and returns the diagnostics with its result", async () => {
    const { run, executor } = setup(engines.warn);
    const result = await run.exec(
      { code: 'const file = await tools.read_file({ pth: "a.txt" });\nreturn file.content;' },
      { toolCallId: "w1" },
    );
    expect(result).toMatchObject({ status: "completed", value: "content of undefined" });
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ line: 1, column: 38, code: "TS2561", accepts: ["path"] }),
    ]);
    expect(executor.calls.map((call) => call.toolId)).toEqual(["core:host:read_file"]);
  });

  it("keeps the diagnostics on a cell that then fails", async () => {
    const { run } = setup(engines.warn);
    const result = await run.exec(
      { code: "const found = await MCP.memory.searchNodes({});\nreturn found;" },
      { toolCallId: "w4" },
    );
    expect(result.status).toBe("failed");
    expect(result.diagnostics).toEqual([
      expect.objectContaining({
        line: 1,
        column: 44,
        code: "TS2345",
        accepts: ["query"],
        message: expect.stringContaining("'query' is missing"),
      }),
    ]);
  });

  it("keeps the diagnostics of a cell whose misspelt field the server silently dropped", async () => {
    const { run, executor } = setup(engines.warn);
    const result = await run.exec({ code: misspelt }, { toolCallId: "w2" });
    expect(result).toMatchObject({ status: "completed", value: "done" });
    expect(result.diagnostics?.[0]).toMatchObject({ line: 3, code: "TS2561" });
    // The side effect the strict mode prevents.
    expect(executor.calls.map((call) => call.toolId)).toContain("core:host:read_file");
  });

  it("adds nothing to a correct cell", async () => {
    const { run } = setup(engines.warn);
    const result = await run.exec({ code: everything }, { toolCallId: "w3" });
    expect(result.status).toBe("completed");
    expect(result).not.toHaveProperty("diagnostics");
  });
});

describe("a check that does not finish", () => {
  it("strict: the cell does not run, and the error says why and what to do", async () => {
    const { run, executor } = setup(engines.strictUnfinished);
    const result = await run.exec({ code: misspelt }, { toolCallId: "u1" });
    expect(result).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    if (result.status !== "failed") return;
    expect(result.error).toMatch(
      /did not run: .*"strict" .*type check did not finish \(the checker was still loading the compiler after 1 ms\)/,
    );
    expect(result.error).toMatch(
      /raise tools\.codeMode\.typecheckTimeoutMs \(now 1 ms\), or set typecheck to "warn"/,
    );
    expect(result).not.toHaveProperty("diagnostics");
    expect(executor.calls).toEqual([]);
    expect(result.telemetry.nested.calls).toBe(0);
  });

  it("warn: the cell runs, and its result notes that it was not checked", async () => {
    const { run, executor } = setup(engines.warnUnfinished);
    const result = await run.exec({ code: misspelt }, { toolCallId: "u2" });
    expect(result).toMatchObject({
      status: "completed",
      value: "done",
      typecheckNote: expect.stringMatching(
        /^The type check did not finish \(.+\); the cell ran unchecked\.$/,
      ),
    });
    expect(result).not.toHaveProperty("diagnostics");
    expect(executor.calls.map((call) => call.toolId)).toContain("core:host:read_file");
  });

  it("a checked cell carries no note", async () => {
    const { run } = setup(engines.warn);
    const result = await run.exec({ code: everything }, { toolCallId: "u3" });
    expect(result.status).toBe("completed");
    expect(result).not.toHaveProperty("typecheckNote");
  });
});

describe("typecheck off", () => {
  it("runs a wrong cell as before, without diagnostics", async () => {
    const { run } = setup(engines.off);
    const result = await run.exec(
      { code: 'const file = await tools.read_file({ pth: "a" });\nreturn file.content;' },
      { toolCallId: "o1" },
    );
    expect(result).toMatchObject({ status: "completed", value: "content of undefined" });
    expect(result).not.toHaveProperty("diagnostics");
  });
});

describe("a check that runs over typecheckBudgetMs", () => {
  // Each cell of 20,000 chained statements keeps the compiler busy far longer than the 4 s budget
  // (10,000 already take over 8 s on an idle machine); a small cell's warm check takes milliseconds.
  const heavy = Array.from(
    { length: 20_000 },
    (_, index) =>
      `const v${index} = await tools.read_file({ path: String(${index > 0 ? `v${index - 1}` : 0}) });`,
  ).join("\n");
  const small = 'const file = await tools.read_file({ pth: "a" });\nreturn file.content;';
  const budgeted = createCodeModeEngine({
    config: {
      enabled: true,
      typecheck: "strict",
      typecheckBudgetMs: 4_000,
      typecheckTimeoutMs: 60_000,
      maxCodeBytes: 2_000_000,
    },
  });
  afterAll(() => budgeted.close());

  const runOf = (agentId: string) => {
    const executor = new TestExecutor();
    const run = budgeted.prepareRun({
      tools: [...hostTools],
      mcpServers: [],
      context: context({ agentId, sessionKey: `${agentId}-key` }),
      executor,
    });
    return { run, executor };
  };

  it("strict refuses the cell naming the budget, and another owner's small check is answered before the bomber's next", async () => {
    const bomber = runOf("bomber");
    const other = runOf("other");
    const order: string[] = [];
    const track = <T>(name: string, promise: Promise<T>) =>
      promise.then((value) => {
        order.push(name);
        return value;
      });
    const first = track("bomb-1", bomber.run.exec({ code: heavy }, { toolCallId: "b1" }));
    const second = track("bomb-2", bomber.run.exec({ code: heavy }, { toolCallId: "b2" }));
    const answered = await track("other", other.run.exec({ code: small }, { toolCallId: "o1" }));
    // The other owner's cell was checked (its misspelt field found), not refused for the bomber's sake.
    expect(answered).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(answered.status === "failed" && answered.error).toMatch(/'pth'/);
    expect(answered).not.toHaveProperty("typecheckNote");
    for (const result of [await first, await second]) {
      expect(result).toMatchObject({ status: "failed", code: "runtime_unavailable" });
      if (result.status !== "failed") continue;
      // The true reason: the budget, with its setting and value; not a compiler still loading.
      expect(result.error).toContain("the type check took longer than 4000 ms");
      expect(result.error).toContain("tools.codeMode.typecheckBudgetMs (now 4000 ms");
      expect(result.error).not.toContain("still loading");
    }
    expect(bomber.executor.calls).toEqual([]);
    // Round robin between owners: the small check went right after the bomber's first, not behind both.
    expect(order.indexOf("other")).toBeLessThan(order.indexOf("bomb-2"));
  }, 180_000);
});
