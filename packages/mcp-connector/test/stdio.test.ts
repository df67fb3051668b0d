import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodeModeError } from "@codecell/contract";
import { renderMcpDeclarations } from "@codecell/mcp-declarations";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpConnector, type McpChangeEvent, type McpConnector } from "../src/index.js";
import { controlServerPath, serverBin } from "./support/servers.js";

function text(result: { content?: unknown }): string {
  const first = (result.content as Array<{ type: string; text?: string }> | undefined)?.[0];
  return first?.type === "text" ? first.text! : "";
}

async function expectCode(promise: Promise<unknown>, code: string, message: RegExp): Promise<CodeModeError> {
  try {
    await promise;
  } catch (error) {
    expect(CodeModeError.is(error), String(error)).toBe(true);
    expect((error as CodeModeError).code).toBe(code);
    expect((error as Error).message).toMatch(message);
    return error as CodeModeError;
  }
  throw new Error(`expected a ${code} error`);
}

const scratch = mkdtempSync(join(tmpdir(), "codecell-mcp-connector-"));
let connector: McpConnector;
const events: McpChangeEvent[] = [];

beforeAll(async () => {
  connector = createMcpConnector(
    {
      everything: {
        command: process.execPath,
        args: [serverBin("@modelcontextprotocol/server-everything"), "stdio"],
      },
      memory: {
        command: process.execPath,
        args: [serverBin("@modelcontextprotocol/server-memory")],
        env: { MEMORY_FILE_PATH: join(scratch, "memory.jsonl") },
      },
      control: { command: process.execPath, args: [controlServerPath] },
      broken: {
        command: process.execPath,
        args: ["-e", "console.error('GITHUB_TOKEN is not set'); process.exit(1)"],
      },
      missing: { command: "/nonexistent/mcp-server-binary" },
    },
    { reconnectInitialDelayMs: 100, reconnectMaxDelayMs: 400 },
  );
  connector.onChange((event) => events.push(event));
  await connector.start();
});

afterAll(async () => {
  await connector?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe("starting", () => {
  it("reports servers that fail to start, with their reason, and keeps the others", () => {
    const byServer = Object.fromEntries(connector.diagnostics.map((d) => [d.server, d.message]));
    expect(byServer.broken).toMatch(/failed to start.*GITHUB_TOKEN is not set/s);
    expect(byServer.missing).toMatch(/failed to start/);
    expect(Object.keys(byServer).sort()).toEqual(["broken", "missing"]);
    const states = Object.fromEntries(connector.status().map((s) => [s.server, s.state]));
    expect(states).toEqual({
      everything: "ready",
      memory: "ready",
      control: "ready",
      broken: "failed",
      missing: "failed",
    });
  });

  it("describes the servers: name, title, instructions, tools, resources, prompts", () => {
    const described = connector.describeServers();
    expect(described.map((s) => s.name)).toEqual(["everything", "memory", "control"]);
    const everything = described[0]!;
    expect(everything.title).toBe("Everything Reference Server");
    expect(everything.instructions).toContain("Everything Server");
    expect(everything).toMatchObject({ resources: true, prompts: true });
    expect(everything.tools.map((t) => t.name)).toContain("echo");
    expect(described[1]!.tools.map((t) => t.name)).toContain("create_entities");
    // Five tools served two per page: pagination was followed.
    expect(described[2]!.tools.map((t) => t.name).slice(0, 5)).toEqual([
      "echo_arguments",
      "hang",
      "cancellations",
      "crash",
      "add_tool",
    ]);
    const declarations = renderMcpDeclarations(described);
    expect(declarations.files.map((f) => f.path)).toEqual([
      "mcp/index.d.ts",
      "mcp/everything.d.ts",
      "mcp/memory.d.ts",
      "mcp/control.d.ts",
    ]);
  });

  it("offers every tool as a catalog tool of source mcp", () => {
    const echo = connector.hostTools().find((tool) => tool.owner === "everything" && tool.name === "echo")!;
    expect(echo).toMatchObject({ source: "mcp", owner: "everything", label: "Echo Tool" });
    expect(echo.parameters).toMatchObject({ type: "object", required: ["message"] });
    const readGraph = connector.hostTools().find((tool) => tool.name === "read_graph")!;
    expect(readGraph.outputSchema).toBeDefined();
  });
});

describe("calling tools", () => {
  it("forwards a call and returns the result as it came", async () => {
    const result = await connector.callTool("everything", "echo", { message: "hi" });
    expect(text(result)).toBe("Echo: hi");
    expect(result.isError).toBeUndefined();
  });

  it("fills schema defaults before sending", async () => {
    const result = await connector.callTool("control", "echo_arguments", { text: "x" });
    expect(JSON.parse(text(result))).toEqual({ text: "x", limit: 5 });
    const explicit = await connector.callTool("control", "echo_arguments", { text: "x", limit: 9 });
    expect(JSON.parse(text(explicit))).toEqual({ text: "x", limit: 9 });
    const links = await connector.callTool("everything", "get-resource-links", {});
    expect((links.content as Array<{ type: string }>).filter((c) => c.type === "resource_link")).toHaveLength(
      3,
    );
  });

  it("names a missing required key", async () => {
    await expectCode(
      connector.callTool("control", "echo_arguments", { limit: 1 }),
      "invalid_input",
      /control\.echo_arguments is missing the required key "text" \(Any text\)/,
    );
    await expectCode(connector.callTool("everything", "echo", {}), "invalid_input", /required key "message"/);
  });

  it("refuses input that is not one object", async () => {
    await expectCode(
      connector.callTool("everything", "echo", "hi"),
      "invalid_input",
      /one object argument.*got a string/,
    );
    await expectCode(connector.callTool("everything", "echo", [1]), "invalid_input", /got an array/);
  });

  it("returns an isError result instead of throwing", async () => {
    const result = await connector.callTool("everything", "get-sum", { a: "not a number", b: 1 });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/invalid|expected number/i);
  });

  it("refuses unknown servers and tools with a suggestion", async () => {
    await expectCode(
      connector.callTool("everythin", "echo", {}),
      "invalid_input",
      /No MCP server "everythin"\. Did you mean "everything"\?/,
    );
    await expectCode(
      connector.callTool("everything", "ecko", {}),
      "invalid_input",
      /no tool "ecko"\. Did you mean "echo"\?/,
    );
  });

  it("keeps state in a real server across calls", async () => {
    await connector.callTool("memory", "create_entities", {
      entities: [{ name: "codecell", entityType: "project", observations: ["runs cells"] }],
    });
    const graph = await connector.callTool("memory", "read_graph", {});
    expect(graph.structuredContent).toMatchObject({
      entities: [{ name: "codecell", entityType: "project" }],
    });
  });
});

describe("resources and prompts", () => {
  it("lists and reads a resource", async () => {
    const listing = await connector.listResources("everything");
    expect(listing.resources.length).toBeGreaterThan(0);
    const uri = listing.resources[0]!.uri;
    const read = await connector.readResource("everything", { uri });
    expect(read.contents[0]!.uri).toBe(uri);
  });

  it("lists and gets a prompt", async () => {
    const { prompts } = await connector.listPrompts("everything");
    const simple = prompts.find((prompt) => !(prompt.arguments as unknown[] | undefined)?.length)!;
    const prompt = await connector.getPrompt("everything", { name: simple.name });
    expect(prompt.messages.length).toBeGreaterThan(0);
    await expectCode(
      connector.getPrompt("everything", { arguments: {} }),
      "invalid_input",
      /needs \{ name: string/,
    );
  });

  it("refuses resources on a server that has none", async () => {
    await expectCode(connector.listResources("control"), "invalid_input", /offers no resources/);
  });
});

describe("robustness", () => {
  it("follows tools/list_changed", async () => {
    const before = events.length;
    const added = JSON.parse(text(await connector.callTool("control", "add_tool", {})));
    await expect
      .poll(() => events.slice(before).some((e) => e.server === "control" && e.reason === "tools_changed"))
      .toBe(true);
    const control = connector.describeServers().find((s) => s.name === "control")!;
    expect(control.tools.map((t) => t.name)).toContain(added);
    expect((await connector.callTool("control", added, {})).isError).toBe(true);
  });

  it("times out a hung call, tells the server to cancel, and stays usable", async () => {
    const error = await expectCode(
      connector.callTool("control", "hang", {}, { timeoutMs: 300 }),
      "nested_tool_failed",
      /control\.hang got no answer within 300 ms/,
    );
    expect(error.details).toMatchObject({ server: "control" });
    await expect
      .poll(async () => JSON.parse(text(await connector.callTool("control", "cancellations", {}))))
      .toBeGreaterThanOrEqual(1);
  });

  it("cancels through an AbortSignal", async () => {
    const controller = new AbortController();
    const call = connector.callTool("control", "hang", {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await expectCode(call, "aborted", /aborted; the server was told to cancel it/);
    await expect
      .poll(async () => JSON.parse(text(await connector.callTool("control", "cancellations", {}))))
      .toBeGreaterThanOrEqual(2);
  });

  it("fails the calls of a crashing server with its stderr tail, then reconnects", async () => {
    const error = await expectCode(
      connector.callTool("control", "crash", {}),
      "nested_tool_failed",
      /exited or closed the connection mid-call.*the disk is on fire/s,
    );
    expect(error.details?.stderr).toContain("the disk is on fire");
    expect(connector.status().find((s) => s.server === "control")!.state).toBe("disconnected");
    // Other servers are untouched.
    expect(text(await connector.callTool("everything", "echo", { message: "still here" }))).toBe(
      "Echo: still here",
    );
    await expect
      .poll(
        async () => connector.callTool("control", "cancellations", {}).then(text, (e: Error) => e.message),
        { timeout: 10_000 },
      )
      .toBe("0");
  });

  it("survives a server killed mid-call", async () => {
    const pid = connector.status().find((s) => s.server === "everything")!.pid!;
    const call = connector.callTool("everything", "trigger-long-running-operation", {
      duration: 5,
      steps: 5,
    });
    setTimeout(() => process.kill(pid, "SIGKILL"), 300);
    await expectCode(
      call,
      "nested_tool_failed",
      /everything\.trigger-long-running-operation failed: the server exited/,
    );
    expect(text(await connector.callTool("memory", "read_graph", {}))).toContain("codecell");
    await expect
      .poll(
        async () =>
          connector.callTool("everything", "echo", { message: "back" }).then(text, (e: Error) => e.message),
        {
          timeout: 15_000,
          interval: 200,
        },
      )
      .toBe("Echo: back");
    expect(connector.status().find((s) => s.server === "everything")!.pid).not.toBe(pid);
    expect(events.some((e) => e.server === "everything" && e.reason === "disconnected")).toBe(true);
  });

  it("fails fast while a start failure is backing off", async () => {
    await expectCode(
      connector.callTool("broken", "anything", {}),
      "nested_tool_failed",
      /MCP server "broken" is unavailable/,
    );
  });
});
