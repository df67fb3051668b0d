import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type Connected, callCodeMode, connectStdio, makeSetup } from "./harness.js";

// Downstream servers of both protocol eras behind one cell: the memory server (SDK 1.x, the session
// era) beside a server on SDK v2 that speaks only 2026-07-28, over stdio and over HTTP, where one of
// its tools answers with a task (the extension io.modelcontextprotocol/tasks) that codecell polls.

const modernServer = fileURLToPath(
  new URL("../../../packages/mcp-connector/test/fixtures/modern-server.mjs", import.meta.url),
);

async function startModernHttp(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [modernServer, "http"], { stdio: ["ignore", "ignore", "pipe"] });
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`the modern server did not start: ${output}`)), 15_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /CODECELL_TEST_PORT=(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once("exit", (code) => reject(new Error(`the modern server exited with ${code}: ${output}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

describe("downstream servers of both MCP eras behind a cell", () => {
  let server: { url: string; child: ChildProcess };
  let gateway: Connected;

  beforeAll(async () => {
    server = await startModernHttp();
    const config = baseConfig();
    const setup = makeSetup({
      ...config,
      mcpServers: {
        ...(config.mcpServers as Record<string, unknown>),
        modernStdio: { command: process.execPath, args: [modernServer, "stdio"] },
        modernHttp: { url: `${server.url}/mcp` },
      },
    });
    gateway = await connectStdio(setup.configPath);
  });

  afterAll(async () => {
    await gateway?.close();
    server?.child.kill();
  });

  it("calls tools of the session-era server and of the 2026-07-28 server over stdio and HTTP", async () => {
    // The gateway does not wait for slow servers before it answers; a 2026-07-28 stdio server takes
    // longer to start (it first refuses the older handshake, and the SDK probes it in a second process).
    let servers: unknown;
    for (let attempt = 0; attempt < 100; attempt++) {
      servers = (await callCodeMode(gateway.client, "exec", { code: "return Object.keys(MCP).sort();" }))
        .value;
      if (Array.isArray(servers) && servers.includes("modernStdio") && servers.includes("modernHttp")) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(servers).toEqual(expect.arrayContaining(["memory", "modernHttp", "modernStdio"]));
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const graph = await MCP.memory.read_graph({});
        const overStdio = await MCP.modernStdio.add({ a: 2, b: 3 });
        const overHttp = await MCP.modernHttp.add({ a: 20, b: 22 });
        return {
          entities: graph.structuredContent.entities.length,
          overStdio: overStdio.content[0].text,
          overHttp: overHttp.content[0].text,
        };`,
    });
    expect(result, JSON.stringify(result)).toMatchObject({
      status: "completed",
      value: { entities: 0, overStdio: "5", overHttp: "42" },
    });
  });

  it("runs a tool that answers with a task as one slow call: the run suspends and wait brings its result", async () => {
    // 100 polls at the server's 50 ms interval take longer than the cell's 1.5 s deadline.
    let result = await callCodeMode(gateway.client, "exec", {
      code: `return (await MCP.modernHttp.slow_job({ label: "nightly", polls: 100 })).content[0].text;`,
    });
    expect(result.status, JSON.stringify(result)).toBe("waiting");
    const runId = result.runId!;
    for (let attempt = 0; attempt < 60 && result.status === "waiting"; attempt++) {
      result = await callCodeMode(gateway.client, "wait", { runId });
    }
    expect(result).toMatchObject({ status: "completed", value: "done: nightly" });
    const log = (await (await fetch(`${server.url}/log`)).json()) as Array<{ method: string }>;
    expect(log.filter((entry) => entry.method === "tasks/get").length).toBeGreaterThan(100);
  });
});
