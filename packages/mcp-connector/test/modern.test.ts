import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { CodeModeError } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpConnector, type McpConnector } from "../src/index.js";
import { controlServerPath } from "./support/servers.js";

const modernServerPath = join(controlServerPath, "../modern-server.mjs");

type LogEntry = { method: string; mcpName?: string; taskId?: string; extensions?: Record<string, unknown> };

let child: ChildProcess;
let baseUrl: string;
let connector: McpConnector;

async function startModernHttp(): Promise<{ url: string; child: ChildProcess }> {
  const started = spawn(process.execPath, [modernServerPath, "http"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`the modern server did not start: ${output}`)), 15_000);
    started.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /CODECELL_TEST_PORT=(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    started.once("exit", (code) => reject(new Error(`the modern server exited with ${code}: ${output}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child: started };
}

async function serverLog(): Promise<LogEntry[]> {
  return (await (await fetch(`${baseUrl}/log`)).json()) as LogEntry[];
}

/** Reads the fixture's log until `check` holds, within a bound (a poll, not a timed assertion). */
async function logWhere(check: (log: LogEntry[]) => boolean): Promise<LogEntry[]> {
  let log: LogEntry[] = [];
  for (let attempt = 0; attempt < 600; attempt++) {
    log = await serverLog();
    if (check(log)) return log;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return log;
}

beforeAll(async () => {
  const http = await startModernHttp();
  child = http.child;
  baseUrl = http.url;
  connector = createMcpConnector({
    modernStdio: { command: process.execPath, args: [modernServerPath, "stdio"] },
    modernHttp: { url: `${baseUrl}/mcp` },
  });
  await connector.start();
});

afterAll(async () => {
  await connector?.close();
  child?.kill();
});

describe("downstream servers that speak only MCP 2026-07-28 (SDK v2)", () => {
  it("connects over stdio and HTTP with SDK v2's client, lists and calls tools", async () => {
    expect(connector.diagnostics).toEqual([]);
    expect(connector.status()).toEqual([
      expect.objectContaining({ server: "modernStdio", state: "ready", transport: "stdio", era: "modern" }),
      expect.objectContaining({
        server: "modernHttp",
        state: "ready",
        transport: "streamable-http",
        era: "modern",
      }),
    ]);
    const described = connector.describeServers();
    expect(described.find((server) => server.name === "modernStdio")?.tools.map((tool) => tool.name)).toEqual(
      ["add"],
    );
    expect(described.find((server) => server.name === "modernHttp")?.tools.map((tool) => tool.name)).toEqual([
      "add",
      "slow_job",
    ]);
    for (const server of ["modernStdio", "modernHttp"]) {
      const result = await connector.callTool(server, "add", { a: 2, b: 3 });
      expect(result.content).toEqual([{ type: "text", text: "5" }]);
    }
    await expect(connector.callTool("modernHttp", "add", { a: 2 })).rejects.toSatisfy(
      (error) => CodeModeError.is(error) && error.code === "invalid_input" && /"b"/.test(error.message),
    );
  });

  it("follows a tool that answers with a task until its result, polling tasks/get with Mcp-Name", async () => {
    const result = await connector.callTool("modernHttp", "slow_job", { label: "report", polls: 3 });
    expect(result.content).toEqual([{ type: "text", text: "done: report" }]);
    const log = await serverLog();
    const call = log.find((entry) => entry.method === "tools/call")!;
    expect(Object.keys(call.extensions ?? {})).toContain("io.modelcontextprotocol/tasks");
    const gets = log.filter((entry) => entry.method === "tasks/get");
    expect(gets.length).toBeGreaterThanOrEqual(4);
    for (const get of gets) expect(get.mcpName).toBe(get.taskId);
    expect(new Set(gets.map((get) => get.taskId)).size).toBe(1);
  });

  it("cancels the task with tasks/cancel when the call is aborted", async () => {
    const before = (await serverLog()).length;
    const abort = new AbortController();
    const call = connector.callTool(
      "modernHttp",
      "slow_job",
      { label: "never", polls: 1_000_000 },
      { signal: abort.signal },
    );
    call.catch(() => undefined);
    const polled = await logWhere((log) => log.slice(before).some((entry) => entry.method === "tasks/get"));
    const taskId = polled.slice(before).find((entry) => entry.method === "tasks/get")!.taskId;
    abort.abort();
    await expect(call).rejects.toSatisfy((error) => CodeModeError.is(error) && error.code === "aborted");
    const log = await logWhere((entries) => entries.some((entry) => entry.method === "tasks/cancel"));
    const cancel = log.find((entry) => entry.method === "tasks/cancel");
    expect(cancel).toEqual(expect.objectContaining({ taskId, mcpName: taskId }));
  });
});
