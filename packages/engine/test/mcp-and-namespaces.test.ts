import { buildToolCatalog } from "@codecell/catalog";
import type { McpConnector } from "@codecell/mcp-connector";
import { renderMcpDeclarations } from "@codecell/mcp-declarations";
import { clearCodeModeNamespacesForTest, type NamespaceRuntime } from "@codecell/namespaces";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGuestSurface } from "../src/guest-surface.js";
import { createCodeModeEngine, type McpServerRequest } from "../src/index.js";
import {
  completedValue,
  context,
  hostTools,
  registerNotesNamespace,
  startMemoryServer,
  TestExecutor,
} from "./support.js";

let mcp: McpConnector;
let memory: Awaited<ReturnType<typeof startMemoryServer>>;
const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 5000 } });

beforeAll(async () => {
  memory = await startMemoryServer();
  mcp = memory.mcp;
  registerNotesNamespace();
});

afterAll(async () => {
  clearCodeModeNamespacesForTest();
  await engine.close();
  await memory?.close();
});

class McpExecutor extends TestExecutor {
  readonly mcpRequests: McpServerRequest[] = [];
  async mcpRequest(request: McpServerRequest): Promise<unknown> {
    this.mcpRequests.push(request);
    if (request.op === "resources.list") return mcp.listResources(request.server);
    throw new Error(`unsupported ${request.op}`);
  }
}

function setup(overrides: Partial<Parameters<typeof engine.prepareRun>[0]> = {}) {
  const executor = new McpExecutor();
  executor.mcp = mcp;
  const run = engine.prepareRun({
    tools: [...hostTools, ...mcp.hostTools()],
    mcpServers: mcp.describeServers(),
    context: context(),
    executor,
    ...overrides,
  });
  return { run, executor };
}

describe("MCP in the guest", () => {
  it("reads declarations through API without any tool call", async () => {
    const { run, executor } = setup();
    const result = await run.exec(
      {
        code: `
          const files = await API.list("mcp");
          const memory = await API.read("mcp/memory.d.ts");
          let refused;
          try { await API.read("mcp/../secrets"); } catch (e) { refused = e.message; }
          return { paths: files.map((file) => file.path), hasCreate: memory.includes("createEntities"), refused };
        `,
      },
      { toolCallId: "e1" },
    );
    expect(result).toMatchObject({
      status: "completed",
      value: { paths: ["mcp/index.d.ts", "mcp/memory.d.ts"], hasCreate: true },
    });
    expect(completedValue<{ refused: string }>(result).refused).toBeTruthy();
    expect(result.telemetry.nested).toMatchObject({ calls: 0, searches: 0, describes: 0 });
    expect(executor.calls).toHaveLength(0);
  });

  it("reads each declaration file whole from the host, at the size API.list reports", async () => {
    // A VM carries API paths and sizes only; API.read fetches the text the engine rendered.
    const { run } = setup();
    const result = await run.exec(
      {
        code: `
          const files = await API.list();
          const read = [];
          for (const file of files) {
            const text = await API.read(file.path);
            read.push({ path: file.path, bytes: file.bytes, text });
          }
          return read;
        `,
      },
      { toolCallId: "e-api" },
    );
    expect(result.status).toBe("completed");
    const read = completedValue<Array<{ path: string; bytes: number; text: string }>>(result);
    expect(read.map((file) => file.path)).toEqual(["mcp/index.d.ts", "mcp/memory.d.ts"]);
    const rendered = renderMcpDeclarations(mcp.describeServers());
    for (const file of read) {
      const expected = rendered.files.find((candidate) => candidate.path === file.path)?.content;
      expect(file.text).toBe(expected);
      expect(file.bytes).toBe(Buffer.byteLength(file.text, "utf8"));
    }
  });

  it("gives each VM the API files' paths and sizes, not their text", () => {
    const declarations = renderMcpDeclarations(mcp.describeServers());
    const surface = buildGuestSurface(
      buildToolCatalog([...hostTools, ...mcp.hostTools()]),
      declarations,
      // No namespaces: only the API files are looked at.
      { namespaces: [] } as unknown as NamespaceRuntime,
    );
    expect(surface.apiFiles).toEqual(
      declarations.files.map(({ path, description, content }) => ({
        path,
        description,
        bytes: Buffer.byteLength(content, "utf8"),
      })),
    );
  });

  it("calls a real MCP server through MCP.<server>.<tool>() and keeps MCP out of tools.*", async () => {
    const { run, executor } = setup();
    const result = await run.exec(
      {
        code: `
          await MCP.memory.createEntities({ entities: [{ name: "Ada", entityType: "person", observations: ["likes tea"] }] });
          const graph = await MCP.memory.readGraph({});
          const header = await MCP.memory.$api("read_graph");
          const inAllTools = ALL_TOOLS.some((tool) => tool.source === "mcp");
          const searched = (await tools.search("read graph")).map((tool) => tool.id);
          let callError;
          try { await tools.call("mcp:memory:read_graph", {}); } catch (e) { callError = e.message; }
          return { text: graph.content[0].text, header, inAllTools, searched, callError, shortcut: typeof tools.read_graph };
        `,
      },
      { toolCallId: "e2" },
    );
    expect(result.status).toBe("completed");
    const value = completedValue<Record<string, unknown>>(result);
    expect(value.text).toContain("Ada");
    expect(value.header).toContain("readGraph");
    expect(value.inAllTools).toBe(false);
    expect(value.searched).not.toContain("mcp:memory:read_graph");
    expect(value.callError).toContain("MCP.<server>.<tool>");
    expect(value.shortcut).toBe("undefined");
    expect(executor.calls.map((call) => [call.toolId, call.via])).toEqual([
      ["mcp:memory:create_entities", "mcp"],
      ["mcp:memory:read_graph", "mcp"],
    ]);
  });

  it("denied MCP tools are absent from the declarations and not callable", async () => {
    const { run } = setup({ deny: ["mcp:memory:delete_*"] });
    const result = await run.exec(
      {
        code: `return { declared: (await API.read("mcp/memory.d.ts")).includes("deleteEntities"), member: typeof MCP.memory.deleteEntities }`,
      },
      { toolCallId: "e3" },
    );
    expect(result).toMatchObject({ status: "completed", value: { declared: false, member: "undefined" } });
  });
});

describe("namespaces in the guest", () => {
  it("calls a plugin namespace through its global and through namespaces.<name>", async () => {
    const { run, executor } = setup();
    const result = await run.exec(
      {
        code: `
          await Notes.add("call mom", "family");
          const family = await namespaces.Notes.list("family");
          const all = await Notes.nested.count();
          return { family, count: all.length };
        `,
      },
      { toolCallId: "e4" },
    );
    expect(result).toMatchObject({
      status: "completed",
      value: { family: [{ text: "call mom", tag: "family" }], count: 2 },
    });
    expect(executor.calls.map((call) => [call.toolId, call.via, call.input])).toEqual([
      ["plugin:notes:notes_add", "namespace", { text: "call mom", tag: "family" }],
      ["plugin:notes:notes_list", "namespace", { tag: "family" }],
      ["plugin:notes:notes_list", "namespace", {}],
    ]);
  });

  it("hides the namespace when its tools are not visible", async () => {
    const { run } = setup({ deny: ["notes_add"] });
    const result = await run.exec(
      { code: "return [typeof Notes, typeof namespaces.Notes]" },
      { toolCallId: "e5" },
    );
    expect(result).toMatchObject({ status: "completed", value: ["undefined", "undefined"] });
  });

  it("namespace errors are catchable in the guest", async () => {
    const { run, executor } = setup();
    executor.approvals.set("plugin:notes:notes_add", false);
    const result = await run.exec(
      { code: `try { await Notes.add("x"); } catch (e) { return [e.code, e.message]; }` },
      { toolCallId: "e6" },
    );
    expect(result).toMatchObject({
      status: "completed",
      value: ["nested_tool_failed", expect.stringContaining("declined")],
    });
  });
});
