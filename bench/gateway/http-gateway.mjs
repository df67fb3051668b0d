// What the benches that drive the built CLI over Streamable HTTP share: a throwaway workspace with a
// config, `codecell serve --http 0` on 127.0.0.1, one MCP client session, and the figures they take of it.
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** The gateway app (its built CLI, demo workspace and test fixtures) and the bench folder (results). */
export const appDir = fileURLToPath(new URL("../../apps/gateway/", import.meta.url));
export const benchDir = fileURLToPath(new URL("..", import.meta.url));
/** The CLI the benches start: this build's, or BENCH_CLI (another build's dist/cli.js, to compare). */
export const cli = process.env.BENCH_CLI ?? join(appDir, "dist", "cli.js");

/** Removes `dir` when this process exits, however it ends its run, so a bench leaves nothing in /tmp. */
export function removeAtExit(dir) {
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
}

/**
 * A fresh temporary folder holding a copy of the demo workspace and a codecell.json5 with `config`
 * (or what `config(dir)` returns, for settings that name files in the folder).
 */
export function benchWorkspace(prefix, config) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  removeAtExit(dir);
  cpSync(join(appDir, "demo-workspace"), join(dir, "workspace"), { recursive: true });
  const configPath = join(dir, "codecell.json5");
  const settings = typeof config === "function" ? config(dir) : config;
  writeFileSync(configPath, JSON.stringify({ workspace: "./workspace", ...settings }));
  return { dir, configPath };
}

/** The real memory MCP server from node_modules, keeping its graph in `dir`: the benches' nested calls. */
export function memoryServer(dir) {
  return {
    package: "@modelcontextprotocol/server-memory",
    env: { MEMORY_FILE_PATH: join(dir, "memory.jsonl") },
  };
}

/** The benches' two cells: a trivial one, and 10 sequential nested calls to the memory server. */
export const BENCH_CELLS = {
  trivial: "return 1 + 1;",
  "10 MCP calls":
    "let n = 0; for (let i = 0; i < 10; i++) { const g = await MCP.memory.readGraph({}); n += g.structuredContent.entities.length + 1; } return n;",
};

/** Starts `codecell serve --http 0` (a free loopback port) and resolves once it prints its endpoint. */
export async function startHttpGateway(configPath, stderr = "ignore") {
  const child = spawn(process.execPath, [cli, "serve", "--config", configPath, "--http", "0"], {
    stdio: ["ignore", "pipe", stderr],
  });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const match = /MCP endpoint\s+(\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`gateway exited ${code}`)));
  });
  return { child, url };
}

/** One MCP session: the engine treats each as its own session (the pool's fairness owner). */
export async function mcpSession(url, name) {
  const client = new Client({ name, version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const exec = (code) =>
    client
      .callTool({ name: "exec", arguments: { code } }, undefined, { timeout: 120_000 })
      .then((result) => result.structuredContent ?? {});
  return {
    exec,
    async close() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  };
}

/** The value at `p` percent of an ascending array (nearest rank). */
export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The resident set of process `pid` in bytes (/proc/<pid>/status), or null once it has gone. */
export function rssOf(pid) {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}
