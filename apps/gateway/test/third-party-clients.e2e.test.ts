import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// Third-party MCP clients, as their users run them, against `codecell serve --http`: the MCP Inspector's
// CLI (one connection per command) and mcp-remote (a stdio bridge to the HTTP endpoint).

const require = createRequire(import.meta.url);
const packageBin = (name: string, bin: string) => join(require.resolve(`${name}/package.json`), "..", bin);
/** The Inspector 0.17.2's `--cli` entry (later releases need Node 22). */
const INSPECTOR = packageBin("@modelcontextprotocol/inspector", "cli/build/cli.js");
const MCP_REMOTE = packageBin("mcp-remote", "dist/proxy.js");
const YIELDING = `await yield_control("come back later"); return 40 + 2;`;

type Structured = { status: string; runId?: string; value?: unknown; error?: string };

/** Runs one Inspector CLI command against `mcpUrl` and parses what it prints. */
function inspector(mcpUrl: string, args: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [INSPECTOR, "--cli", mcpUrl, "--transport", "http", ...args],
      { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the Inspector CLI failed: ${error.message}\n${stdout}\n${stderr}`));
        else resolve(JSON.parse(stdout) as Record<string, unknown>);
      },
    );
  });
}

const callArgs = (tool: string, toolArgs: string[], headers: string[] = []) => [
  "--method",
  "tools/call",
  "--tool-name",
  tool,
  "--tool-arg",
  ...toolArgs,
  ...headers.flatMap((header) => ["--header", header]),
];

describe("third-party clients against serve --http", () => {
  let gateway: HttpGateway;

  beforeAll(async () => {
    gateway = await startHttpGateway(makeSetup(baseConfig({ mcpServers: {} })).configPath);
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it("the Inspector CLI runs exec, then wait as a separate command in the same codecell-session scope", async () => {
    const scope = ["codecell-session: inspector-task"];
    const started = (await inspector(gateway.mcpUrl, callArgs("exec", [`code=${YIELDING}`], scope)))
      .structuredContent as Structured;
    expect(started.status).toBe("waiting");
    const runId = started.runId!;
    // Each command is a new MCP session: without the scope header the run is not this caller's.
    const unscoped = (await inspector(gateway.mcpUrl, callArgs("wait", [`runId=${runId}`])))
      .structuredContent as Structured;
    expect(unscoped.status).toBe("failed");
    expect(unscoped.error).toMatch(/unknown runId/);
    const finished = (await inspector(gateway.mcpUrl, callArgs("wait", [`runId=${runId}`], scope)))
      .structuredContent as Structured;
    expect(finished).toMatchObject({ status: "completed", value: 42 });
  });

  it("the Inspector CLI lists exactly exec and wait, the resources and no resource templates", async () => {
    const tools = (await inspector(gateway.mcpUrl, ["--method", "tools/list"])) as {
      tools: Array<{ name: string }>;
    };
    expect(tools.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    const resources = (await inspector(gateway.mcpUrl, ["--method", "resources/list"])) as {
      resources: Array<{ uri: string }>;
    };
    expect(resources.resources.map((resource) => resource.uri)).toContain("codecell://session/catalog");
    // A server with resources answers resources/templates/list too, never "method not found".
    expect(await inspector(gateway.mcpUrl, ["--method", "resources/templates/list"])).toMatchObject({
      resourceTemplates: [],
    });
  });

  it("mcp-remote bridges stdio to the HTTP gateway: exactly exec and wait, and a cell runs", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MCP_REMOTE, gateway.mcpUrl, "--transport", "http-only"],
      // Its OAuth state goes to a folder of this test, never the user's home.
      env: {
        ...(process.env as Record<string, string>),
        MCP_REMOTE_CONFIG_DIR: mkdtempSync(join(tmpdir(), "mcp-remote-")),
      },
      stderr: "ignore",
    });
    const client = new Client({ name: "codecell-test-mcp-remote", version: "1.0.0" });
    await client.connect(transport);
    try {
      const listed = await client.listTools();
      expect(listed.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
      const ran = await client.callTool({
        name: "exec",
        arguments: { code: `console.log("via bridge"); return 6 * 7;` },
      });
      expect(ran.structuredContent).toMatchObject({ status: "completed", value: 42 });
      // One bridge is one session: wait on a run it started goes through it too.
      const started = (await client.callTool({ name: "exec", arguments: { code: YIELDING } }))
        .structuredContent as Structured;
      const finished = await client.callTool({ name: "wait", arguments: { runId: started.runId! } });
      expect(finished.structuredContent).toMatchObject({ status: "completed", value: 42 });
    } finally {
      await client.close();
    }
  });
});
