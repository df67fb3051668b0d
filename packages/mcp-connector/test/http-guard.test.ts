import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { CodeModeError } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpConnector, type McpConnector } from "../src/index.js";

// The promise tested here: "A downstream result nested 5,000 deep is dropped silently and reported 60 s later as
// 'no answer'. Report oversized or too-deep results at once as nested_tool_failed naming the limit." Here
// for servers reached over HTTP (Streamable HTTP answering as JSON, and as an SSE stream).

const RAW_SERVER = fileURLToPath(new URL("./fixtures/raw-http-server.mjs", import.meta.url));
const children: ChildProcess[] = [];
let connector: McpConnector;

async function startRaw(mode: "json" | "sse"): Promise<string> {
  const child = spawn(process.execPath, [RAW_SERVER, mode], { stdio: ["ignore", "ignore", "pipe"] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /CODECELL_TEST_PORT=(\d+)/.exec(output);
      if (match) resolve(Number(match[1]));
    });
    child.once("exit", (code) => reject(new Error(`raw server exited with ${code}: ${output}`)));
  });
  return `http://127.0.0.1:${port}/mcp`;
}

beforeAll(async () => {
  connector = createMcpConnector(
    {
      json: { url: await startRaw("json"), transport: "streamable-http" },
      sse: { url: await startRaw("sse"), transport: "streamable-http" },
    },
    // A call that waited for this timeout would be the old "no answer"; each case must fail far sooner.
    { callTimeoutMs: 45_000 },
  );
  await connector.start();
});

afterAll(async () => {
  await connector?.close();
  for (const child of children) child.kill();
});

// "At once" below: the call timeout (45 s) lies past the test's own timeout (20 s), so a call that
// waited for it fails the test; only the guard refusing the answer as it arrives ends the call in time.
async function failure(server: string, tool: string, input: Record<string, unknown>) {
  const error = await connector.callTool(server, tool, input).then(
    () => null,
    (caught: unknown) => caught,
  );
  return { error: error as CodeModeError };
}

describe.each(["json", "sse"])("an HTTP server answering as %s", (server) => {
  it("connects and calls", async () => {
    expect(connector.diagnostics).toEqual([]);
    const echo = await connector.callTool(server, "echo", { text: "fine" });
    expect(echo.content).toEqual([{ type: "text", text: "fine" }]);
  });

  it("fails a result nested 5,000 deep at once as nested_tool_failed naming the limit", async () => {
    const { error } = await failure(server, "deep_result", { depth: 5000 });
    expect(CodeModeError.is(error)).toBe(true);
    expect(error.code).toBe("nested_tool_failed");
    expect(error.message).toMatch(/nested more than 1000 levels deep/);
    // The connection is still good.
    expect((await connector.callTool(server, "echo", { text: "after" })).content).toEqual([
      { type: "text", text: "after" },
    ]);
  });

  it("fails a result over 10 MiB at once as nested_tool_failed naming the limit", async () => {
    const { error } = await failure(server, "big_result", { bytes: 11 * 1024 * 1024 });
    expect(CodeModeError.is(error)).toBe(true);
    expect(error.code).toBe("nested_tool_failed");
    expect(error.message).toMatch(/larger than 10485760 bytes/);
    expect((await connector.callTool(server, "echo", { text: "after" })).content).toEqual([
      { type: "text", text: "after" },
    ]);
  });

  it("passes a result just under both limits", async () => {
    const deep = await connector.callTool(server, "deep_result", { depth: 900 });
    expect(deep.content).toEqual([{ type: "text", text: "deep" }]);
    const big = await connector.callTool(server, "big_result", { bytes: 1024 * 1024 });
    expect((big.content as Array<{ text: string }>)[0]!.text).toHaveLength(1024 * 1024);
  });
});
