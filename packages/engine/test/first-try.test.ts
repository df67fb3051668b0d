// Cells written the way models write them on their first try, after reading only the exec description.
// Each class of first-try mistake either completes or fails with a message that names the fix.
import type { CodeModeResult } from "@codecell/contract";
import { clearCodeModeNamespacesForTest } from "@codecell/namespaces";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCodeModeEngine } from "../src/index.js";
import {
  context,
  failedError,
  hostTools,
  registerNotesNamespace,
  startMemoryServer,
  TestExecutor,
} from "./support.js";

let memory: Awaited<ReturnType<typeof startMemoryServer>>;
const engine = createCodeModeEngine({
  config: { enabled: true, timeoutMs: 5000, maxOutputBytes: 2048, maxPendingToolCalls: 4 },
});

beforeAll(async () => {
  memory = await startMemoryServer();
  registerNotesNamespace();
});

afterAll(async () => {
  clearCodeModeNamespacesForTest();
  await engine.close();
  await memory?.close();
});

let callNumber = 0;
function setup() {
  const executor = new TestExecutor();
  executor.mcp = memory.mcp;
  const run = engine.prepareRun({
    tools: [...hostTools, ...memory.mcp.hostTools()],
    mcpServers: memory.mcp.describeServers(),
    deny: ["admin_*"],
    context: context({ sessionId: `first-try-${++callNumber}` }),
    executor,
  });
  return { run, executor };
}

async function exec(code: string, language?: "javascript" | "typescript"): Promise<CodeModeResult> {
  const { run } = setup();
  return run.exec({ code, ...(language ? { language } : {}) }, { toolCallId: `call-${++callNumber}` });
}

function completed(result: CodeModeResult): { value: unknown; output: unknown } {
  if (result.status !== "completed") throw new Error(`expected completed, got ${JSON.stringify(result)}`);
  return { value: result.value, output: result.output };
}

function failedWith(result: CodeModeResult): string {
  if (result.status !== "failed") throw new Error(`expected failed, got ${JSON.stringify(result)}`);
  return result.error;
}

describe("console.* in a cell", () => {
  it.each([
    [
      "log",
      'console.log("found", 3, "files"); return 1',
      { type: "text", text: "found 3 files", level: "log" },
    ],
    ["info", "console.info({ ok: true }); return 1", { type: "text", text: '{"ok":true}', level: "info" }],
    ["warn", 'console.warn("careful"); return 1', { type: "text", text: "careful", level: "warn" }],
    [
      "error",
      'console.error(new Error("boom")); return 1',
      { type: "text", text: "Error: boom", level: "error" },
    ],
    ["debug", "console.debug([1, 2]); return 1", { type: "text", text: "[1,2]", level: "debug" }],
    ["no arguments", "console.log(); return 1", { type: "text", text: "", level: "log" }],
  ])("console.%s appends to the output with its level kept", async (_name, code, item) => {
    const { value, output } = completed(await exec(code));
    expect(value).toBe(1);
    expect(output).toEqual([item]);
  });

  it("keeps console output in order with text() and json()", async () => {
    const { output } = completed(
      await exec(`
        text("start");
        const file = await tools.read_file({ path: "a.txt" });
        console.log("read", file.path);
        json({ n: 1 });
        return "done";
      `),
    );
    expect(output).toEqual([
      { type: "text", text: "start" },
      { type: "text", text: "read a.txt", level: "log" },
      { type: "json", value: { n: 1 } },
    ]);
  });

  it("counts console output against maxOutputBytes like text()", async () => {
    const result = await exec('for (let i = 0; i < 100; i++) console.log("x".repeat(100)); return 1');
    expect(result).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    expect(failedWith(result)).toContain("console.log()");
  });

  it("keeps console frozen: a cell cannot replace its methods", async () => {
    const { value } = completed(
      await exec(`
        "use strict";
        let replaced = true;
        try { console.log = () => {}; } catch { replaced = false; }
        return { replaced, frozen: Object.isFrozen(console) };
      `),
    );
    expect(value).toEqual({ replaced: false, frozen: true });
  });
});

describe("a cell that ends with its value instead of returning it", () => {
  it.each([
    ["a last expression", 'const t = await tools.read_file({ path: "a.txt" });\nObject.keys(t)'],
    [
      "an async arrow it never called, the shape other code-mode runtimes ask for",
      'async () => {\n  const t = await tools.read_file({ path: "a.txt" });\n  return Object.keys(t);\n}',
    ],
    [
      "its own main function, called last",
      'async function main() {\n  const t = await tools.read_file({ path: "a.txt" });\n  return Object.keys(t);\n}\nmain();',
    ],
  ])("%s", async (_name, code) => {
    const { run, executor } = setup();
    const result = await run.exec({ code }, { toolCallId: `call-${++callNumber}` });
    expect(completed(result).value).toEqual(["path", "content"]);
    expect(executor.calls.map((call) => call.toolId)).toEqual([expect.stringContaining("read_file")]);
  });
});

describe("a cell sent inside a Markdown code fence", () => {
  it("runs the code inside, with the lines of what was sent", async () => {
    const code = '```js\nconst t = await tools.read_file({ path: "a.txt" });\nreturn t.path;\n```';
    expect(completed(await exec(code)).value).toBe("a.txt");
    const broken = "```javascript\nconst t = 1;\nreturn t.a.b;\n```";
    expect(failedWith(await exec(broken))).toContain("(line 3, column");
  });

  it("runs a ts fence as TypeScript", async () => {
    const result = await exec("```ts\nconst n: number = 2;\nreturn n * 3;\n```");
    expect(completed(result).value).toBe(6);
  });
});

describe("forgiving names that stay honest", () => {
  it.each([
    ["camelCase of a core tool", 'return (await tools.readFile({ path: "a.txt" })).path'],
    ["PascalCase of a core tool", 'return (await tools.ReadFile({ path: "a.txt" })).path'],
    ["flat case of a core tool", 'return (await tools.readfile({ path: "a.txt" })).path'],
    ["upper snake case of a core tool", 'return (await tools.READ_FILE({ path: "a.txt" })).path'],
  ])("%s calls the tool", async (_name, code) => {
    expect(completed(await exec(code)).value).toBe("a.txt");
  });

  it.each([
    ["original MCP name", "create_entities"],
    ["camelCase MCP name", "createEntities"],
    ["PascalCase MCP name", "CreateEntities"],
  ])("MCP.memory answers to the %s", async (_name, member) => {
    const { value } = completed(
      await exec(`
        await MCP.memory.${member}({ entities: [{ name: "Ada", entityType: "person", observations: ["wrote notes"] }] });
        const graph = await MCP.memory.read_graph({});
        return graph.structuredContent.entities.map((entity) => entity.name);
      `),
    );
    expect(value).toContain("Ada");
  });

  it("keeps aliases out of listings, so Object.keys shows each member once", async () => {
    const { value } = completed(
      await exec(`
        return {
          tools: Object.keys(tools).filter((name) => /read/i.test(name)),
          memory: Object.keys(MCP.memory).filter((name) => /entit/i.test(name)),
          sameFunction: tools.readFile === tools.read_file && MCP.memory.create_entities === MCP.memory.createEntities,
          frozen: Object.isFrozen(tools) && Object.isFrozen(MCP) && Object.isFrozen(MCP.memory),
        };
      `),
    );
    expect(value).toEqual({
      tools: ["read_file"],
      memory: ["createEntities", "deleteEntities"],
      sameFunction: true,
      frozen: true,
    });
  });

  it("never lets an alias shadow a real name or resolve an ambiguous spelling", async () => {
    const executor = new TestExecutor();
    const twin = (name: string) => ({
      name,
      description: `A tool named ${name}.`,
      parameters: { type: "object", properties: {} },
      source: "core" as const,
      owner: "host",
    });
    const run = engine.prepareRun({
      // getItem and get_item differ only in spelling: each keeps its own name, and GetItem, which could
      // mean either, resolves to neither. search_notes may not take over the `search` helper.
      tools: [twin("getItem"), twin("get_item"), twin("search_notes"), twin("search")],
      context: context(),
      executor,
    });
    const result = await run.exec(
      {
        code: `return {
          getItem: typeof tools.getItem, get_item: typeof tools.get_item, GetItem: typeof tools.GetItem,
          searchNotes: typeof tools.searchNotes, search: typeof tools.search,
        }`,
      },
      { toolCallId: "twins" },
    );
    expect(completed(result).value).toEqual({
      getItem: "function",
      get_item: "function",
      GetItem: "undefined",
      searchNotes: "function",
      search: "function",
    });
    await run.exec({ code: "return await tools.get_item({})" }, { toolCallId: "twins-2" });
    expect(executor.calls.at(-1)?.toolId).toBe("core:host:get_item");
  });
});

describe("API paths without the mcp/ prefix", () => {
  it.each([
    ['API.read("memory.d.ts")'],
    ['API.read("memory")'],
    ['API.read("mcp/memory")'],
    ['API.read("/mcp/memory.d.ts".slice(1))'],
  ])("%s reads the one file it can mean", async (call) => {
    const { value } = completed(
      await exec(`const source = await ${call}; return source.includes("createEntities")`),
    );
    expect(value).toBe(true);
  });

  it("lists a folder or a file written without the mcp/ prefix", async () => {
    const { value } = completed(
      await exec('return (await API.list("memory.d.ts")).map((file) => file.path)'),
    );
    expect(value).toEqual(["mcp/memory.d.ts"]);
  });

  it("names the files there are when a path matches none", async () => {
    const error = failedWith(await exec('return await API.read("github.d.ts")'));
    expect(error).toContain(
      'there is no file "github.d.ts"; the files are "mcp/index.d.ts", "mcp/memory.d.ts"',
    );
  });
});

describe("errors that name the expression and the fix", () => {
  it.each([
    [
      "a typo in a tool",
      'return await tools.read_files({ path: "a.txt" })',
      'TypeError: tools.read_files is not a function (line 1, column 19). There is no tool "read_files". Closest: tools.read_file.',
    ],
    [
      "a typo in an MCP tool",
      "return await MCP.memory.readGraphs({})",
      'TypeError: MCP.memory.readGraphs is not a function (line 1, column 24). MCP server "memory" has no tool "readGraphs". Closest: MCP.memory.readGraph. Its signatures: API.read("mcp/memory.d.ts").',
    ],
    [
      "a typo in an MCP server",
      "return await MCP.memroy.readGraph({})",
      'TypeError: MCP.memroy is undefined or null, so reading .readGraph fails (line 1, column 14). There is no MCP server "memroy". Closest: MCP.memory.',
    ],
    [
      "an MCP tool called under tools",
      "return await tools.read_graph({})",
      "It is an MCP tool: call MCP.memory.readGraph.",
    ],
    [
      "a method missing on a tool result",
      'const t = await tools.read_file({ path: "a.txt" });\nreturn t.split("\\n")',
      "TypeError: t.split is not a function (line 2, column",
    ],
    [
      "a property chain through undefined",
      'const r = await tools.read_file({ path: "a.txt" });\nreturn r.body.lines.length',
      "TypeError: r.body is undefined or null, so reading .lines fails (line 2, column",
    ],
  ])("%s", async (_name, code, expected) => {
    expect(failedWith(await exec(code))).toContain(expected);
  });

  it("names nothing when the place could mean two expressions", async () => {
    const error = failedWith(await exec("const a = {}; return a.x.x.x"));
    expect(error).toBe("TypeError: cannot read property 'x' of undefined (line 1, column 22)");
  });
});

describe("a name the cell never declared", () => {
  const globals =
    "The cell's globals: ALL_TOOLS, tools, MCP, API, namespaces, text, json, yield_control, console, store, load, image, Notes.";
  it.each([
    [
      "the network (fetch)",
      'const r = await fetch("https://example.com/api");\nreturn await r.json()',
      `ReferenceError: fetch is not defined (line 1, column 17). A cell has no network: reach other services through tools (tools.search("<what it does>")) or MCP servers (API.search("<what it does>")). ${globals}`,
    ],
    [
      "a timer (setTimeout)",
      "await new Promise((resolve) => setTimeout(resolve, 100));\nreturn 1",
      'ReferenceError: setTimeout is not defined (line 1, column 32). A cell has no timers: await each call where its result is needed; to hand control back and go on later, await yield_control("<why>").',
    ],
    [
      "Node's environment (process.env)",
      "return process.env.API_KEY",
      "ReferenceError: process is not defined (line 1, column 8). A cell runs in a sandbox without Node's or a browser's globals",
    ],
    [
      "print, from another language",
      'print("hello")\nreturn 1',
      "ReferenceError: print is not defined (line 1, column 1). To show text, write console.log(...) or text(...); the cell's result is what it returns (return value).",
    ],
    [
      "a tool called without tools.",
      'const file = await read_file({ path: "a.txt" });\nreturn file',
      "ReferenceError: read_file is not defined (line 1, column 20). read_file is a tool: call it as tools.read_file(input).",
    ],
    [
      "an MCP tool called without MCP.<server>.",
      "return await read_graph({})",
      "ReferenceError: read_graph is not defined (line 1, column 14). read_graph is an MCP tool: call it as MCP.memory.readGraph(input).",
    ],
    [
      "a code-mode global misspelt",
      "return allTools.map((tool) => tool.name)",
      `ReferenceError: allTools is not defined (line 1, column 8). Did you mean ALL_TOOLS? ${globals}`,
    ],
    [
      "a namespace written in lower case",
      "return await notes.list()",
      "ReferenceError: notes is not defined (line 1, column 14). Did you mean Notes?",
    ],
    [
      "a variable from an earlier cell",
      "return files.length",
      `ReferenceError: files is not defined (line 1, column 8). files is not declared in this cell. If it comes from an earlier cell: each exec starts in a fresh sandbox and keeps no variables from the cells before, so declare it again here, or keep its value with await store(key, value) in that cell and await load(key) in this one. ${globals}`,
    ],
  ])("%s", async (_name, code, expected) => {
    expect(failedWith(await exec(code))).toContain(expected);
  });

  it.each([
    [
      "a variable named after a global",
      'const tools = await tools.search("read");\nreturn tools.length',
      "ReferenceError: tools is not initialized (line 1, column 21). The cell declares its own tools (with let, const or class), which hides the global tools everywhere in the cell, so tools cannot be read before that declaration has run. Give the cell's variable another name (for example results or found).",
    ],
    [
      "a variable named after a namespace",
      "const Notes = await Notes.list();\nreturn Notes",
      "ReferenceError: Notes is not initialized (line 1, column 21). The cell declares its own Notes",
    ],
    [
      "a variable used before its declaration",
      "const total = count + 1;\nconst count = 2;\nreturn total",
      "ReferenceError: count is not initialized (line 1, column 15). count is read before its let, const or class declaration has run (those are not hoisted): move the declaration above its first use.",
    ],
  ])("%s", async (_name, code, expected) => {
    expect(failedWith(await exec(code))).toContain(expected);
  });

  it("names a tool of that name before what the sandbox leaves out (a fetch tool, a print tool)", async () => {
    const tools = ["fetch", "print"].map((name) => ({
      name,
      description: `A host tool called ${name}.`,
      parameters: { type: "object", properties: {} },
      source: "core" as const,
      owner: "host",
    }));
    const run = engine.prepareRun({
      tools: [...hostTools, ...tools],
      context: context({ sessionId: `first-try-${++callNumber}` }),
      executor: new TestExecutor(),
    });
    for (const name of ["fetch", "print"]) {
      const result = await run.exec(
        { code: `return await ${name}({})` },
        { toolCallId: `call-${++callNumber}` },
      );
      expect(failedWith(result)).toContain(`${name} is a tool: call it as tools.${name}(input).`);
    }
  });

  it("says the same for a TypeScript cell", async () => {
    const error = failedWith(await exec("const n: number = await fetch('x');\nreturn n", "typescript"));
    expect(error).toMatch(
      /^ReferenceError: fetch is not defined \(line 1, column \d+\)\. A cell has no network/,
    );
  });
});

describe("errors that say what a name holds when it came from a tool call", () => {
  it.each([
    [
      "a string method on a tool's object result",
      'const t = await tools.read_file({ path: "a.txt" });\nconst lines = t.split("\\n");\nreturn lines.length',
      "TypeError: t.split is not a function (line 2, column 17). t holds an object with keys path, content (the result of tools.read_file).",
    ],
    [
      "a property the result does not have",
      'const file = await tools.read_file({ path: "a.txt" });\nreturn file.data.length',
      "TypeError: file.data is undefined or null, so reading .length fails (line 2, column 8). file holds an object with keys path, content (the result of tools.read_file).",
    ],
    [
      "a result called through tools.call",
      'const r = await tools.call("read_file", { path: "a.txt" });\nreturn r.trim()',
      "r holds an object with keys path, content (the result of tools.call).",
    ],
    [
      "an alias spelling of the tool",
      'const t = await tools.readFile({ path: "a.txt" });\nreturn t.toUpperCase()',
      "t holds an object with keys path, content (the result of tools.readFile).",
    ],
    [
      "an array result used as an object",
      "const notes = await tools.notes_list({});\nreturn notes.items.map((n) => n.text)",
      "notes holds an array whose first item is an object with keys text, tag (the result of tools.notes_list).",
    ],
    [
      "an MCP result used as the structured value",
      "const graph = await MCP.memory.readGraph({});\nreturn graph.entities.map((e) => e.name)",
      "graph holds an object with keys content, structuredContent (the result of MCP.memory.readGraph).",
    ],
    [
      "a call that was not awaited",
      'const t = tools.read_file({ path: "a.txt" });\nreturn t.content.split("\\n")',
      "t holds a promise: tools.read_file(...) returns one, so write `const t = await tools.read_file(...)`.",
    ],
  ])("%s", async (_name, code, expected) => {
    expect(failedWith(await exec(code))).toContain(expected);
  });

  it.each([
    [
      "the name is bound again",
      'let t = await tools.read_file({ path: "a.txt" });\nt = await tools.exec({ command: "ls" });\nreturn t.split("\\n")',
    ],
    [
      "a callback parameter of the same name",
      'const t = await tools.read_file({ path: "a.txt" });\nreturn ["x"].map((t) => t.foo())',
    ],
    [
      "two calls of the tool returned different shapes",
      'const a = await tools.slow_echo({ ms: 1, value: { x: 1 } });\nconst b = await tools.slow_echo({ ms: 1, value: "s" });\nreturn a.split(",")',
    ],
  ])("says nothing about the value when %s", async (_name, code) => {
    const error = failedWith(await exec(code));
    expect(error).toMatch(/is not a function \(line \d+, column \d+\)\.$/);
    expect(error).not.toContain(" holds ");
  });
});

describe('TypeScript sent without language: "typescript"', () => {
  const typed = `interface FileResult { path: string; content: string }
const file = (await tools.read_file({ path: "a.txt" })) as FileResult;
const lines: string[] = file.content.split(" ");
return lines.length;`;

  it("runs as TypeScript when TypeScript is enabled, and the telemetry says so", async () => {
    const result = await exec(typed);
    expect(result).toMatchObject({
      status: "completed",
      value: 3,
      telemetry: { detectedLanguage: "typescript" },
    });
  });

  it("leaves the telemetry alone for JavaScript and for TypeScript sent as TypeScript", async () => {
    expect((await exec("return 1")).telemetry.detectedLanguage).toBeUndefined();
    expect((await exec(typed, "typescript")).telemetry.detectedLanguage).toBeUndefined();
  });

  it("keeps the JavaScript error for a cell that is neither", async () => {
    const error = failedWith(await exec("const x = ;\nreturn x"));
    expect(error).toContain("The cell does not parse as JavaScript at line 1:11");
    expect(error).not.toContain("TypeScript");
  });

  it("says the cell looks like TypeScript and which setting allows it when TypeScript is disabled", async () => {
    const jsOnly = createCodeModeEngine({
      config: { enabled: true, timeoutMs: 5000, languages: ["javascript"] },
    });
    try {
      const executor = new TestExecutor();
      const run = jsOnly.prepareRun({ tools: hostTools, context: context(), executor });
      const result = await run.exec({ code: "const n: number = 1;\nreturn n" }, { toolCallId: "ts-off" });
      expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(failedError(result)).toContain(
        'The cell looks like TypeScript (it parses once its types are removed), and TypeScript is not enabled here: write it as JavaScript without type annotations, or ask for the setting tools.codeMode.languages: ["javascript", "typescript"].',
      );
      expect(executor.calls).toEqual([]);
    } finally {
      await jsOnly.close();
    }
  });
});

describe("finding an MCP tool by what it does: API.search", () => {
  it("ranks the visible MCP servers' tools, each with its call expression, one-line signature and description", async () => {
    const { value } = completed(
      await exec('return await API.search("create entities in the knowledge graph", { limit: 3 })'),
    );
    const hits = value as Array<{
      call: string;
      signature: string;
      description: string;
      server: string;
      tool: string;
    }>;
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.length).toBeLessThanOrEqual(3);
    expect(hits[0]).toMatchObject({
      call: "MCP.memory.createEntities",
      server: "memory",
      tool: "create_entities",
      description: "Create multiple new entities in the knowledge graph",
    });
    expect(hits[0]!.signature).toMatch(
      /^MCP\.memory\.createEntities\(input: \{ entities: .*\}\): Promise<McpToolResultOf<.*>>$/,
    );
    expect(hits[0]!.signature).not.toContain("\n");
    for (const hit of hits) expect(hit.call).toMatch(/^MCP\.memory\.\w+$/);
  });

  it("lets a cell find a tool and call it by what API.search returned", async () => {
    const { value } = completed(
      await exec(`const [hit] = await API.search("read the whole graph");
const [server, tool] = hit.call.split(".").slice(1);
const graph = await MCP[server][tool]({});
return { call: hit.call, isError: graph.isError ?? false };`),
    );
    expect(value).toEqual({ call: "MCP.memory.readGraph", isError: false });
  });

  it("leaves tools.search and ALL_TOOLS without MCP tools, as the spec says", async () => {
    // Spec, "Tool catalog": ALL_TOOLS, tools.search, tools.describe and tools.call leave MCP entries out;
    // MCP tools are reached under MCP.<server>.
    const { value } = completed(
      await exec(`const found = await tools.search("knowledge graph entities", { limit: 50 });
return { search: found.filter((t) => t.source === "mcp").length, all: ALL_TOOLS.filter((t) => t.source === "mcp").length };`),
    );
    expect(value).toEqual({ search: 0, all: 0 });
  });

  it("says in one line of the exec description what finds MCP tools", () => {
    const { run } = setup();
    const description = run.modelTools[0]!.description;
    expect(description).toContain("every tool except MCP tools");
    expect(description).toContain(
      'await API.search(query) ranks MCP tools; API.read("mcp/<server>.d.ts") has their signatures.',
    );
  });

  it("refuses a query that is not a string with the fix", async () => {
    const error = failedWith(await exec("return await API.search({ q: 'graph' })"));
    expect(error).toContain("API.search(query): query");
  });
});
