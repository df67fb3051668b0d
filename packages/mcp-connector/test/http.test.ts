import type { ChildProcess } from "node:child_process";
import { CodeModeError } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpConnector, type McpConnector } from "../src/index.js";
import { startEverythingHttp } from "./support/servers.js";

const children: ChildProcess[] = [];
let connector: McpConnector;

beforeAll(async () => {
  const streamable = await startEverythingHttp("streamableHttp");
  const sse = await startEverythingHttp("sse");
  children.push(streamable.child, sse.child);
  connector = createMcpConnector({
    remote: { url: `${streamable.url}/mcp`, headers: { "x-codecell-test": "1" } },
    legacy: { url: `${sse.url}/sse` },
  });
  await connector.start();
});

afterAll(async () => {
  await connector?.close();
  for (const child of children) child.kill();
});

describe("server-everything over Streamable HTTP", () => {
  it("connects over Streamable HTTP and lists tools, resources and prompts", async () => {
    expect(connector.diagnostics).toEqual([]);
    const status = connector.status().find((s) => s.server === "remote")!;
    expect(status).toMatchObject({ state: "ready", transport: "streamable-http" });
    const remote = connector.describeServers().find((s) => s.name === "remote")!;
    expect(remote.tools.map((t) => t.name)).toContain("echo");
    expect((await connector.listResources("remote")).resources.length).toBeGreaterThan(0);
    expect((await connector.listPrompts("remote")).prompts.length).toBeGreaterThan(0);
  });

  it("calls tools, with defaults, required keys and isError results", async () => {
    const echo = await connector.callTool("remote", "echo", { message: "over http" });
    expect(echo.content).toEqual([{ type: "text", text: "Echo: over http" }]);
    const links = await connector.callTool("remote", "get-resource-links", {});
    expect((links.content as Array<{ type: string }>).filter((c) => c.type === "resource_link")).toHaveLength(
      3,
    );
    const wrong = await connector.callTool("remote", "get-sum", { a: "x", b: 1 });
    expect(wrong.isError).toBe(true);
    await expect(connector.callTool("remote", "get-sum", { a: 1 })).rejects.toSatisfy(
      (error) => CodeModeError.is(error) && error.code === "invalid_input" && /"b"/.test(error.message),
    );
  });

  it("reads a resource and gets a prompt", async () => {
    const { resources } = await connector.listResources("remote");
    const read = await connector.readResource("remote", { uri: resources[0]!.uri });
    expect(read.contents.length).toBe(1);
    const { prompts } = await connector.listPrompts("remote");
    const simple = prompts.find((prompt) => !(prompt.arguments as unknown[] | undefined)?.length)!;
    expect((await connector.getPrompt("remote", { name: simple.name })).messages.length).toBeGreaterThan(0);
  });
});

describe("legacy SSE fallback", () => {
  it("falls back to SSE when the server does not speak Streamable HTTP", async () => {
    expect(connector.status().find((s) => s.server === "legacy")).toMatchObject({
      state: "ready",
      transport: "sse",
    });
    const echo = await connector.callTool("legacy", "echo", { message: "old school" });
    expect(echo.content).toEqual([{ type: "text", text: "Echo: old school" }]);
  });
});
