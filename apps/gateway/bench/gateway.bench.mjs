// End-to-end exec latency through the MCP protocol: the built CLI spawned as a real server, driven by
// the SDK client over stdio and over Streamable HTTP on 127.0.0.1. Run `pnpm --filter @codecell/gateway
// bench` (it builds first through turbo). Prints a table and writes bench-results/gateway.json.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const appDir = fileURLToPath(new URL("..", import.meta.url));
const cli = join(appDir, "dist", "cli.js");
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const WARMUP = 20;

const dir = mkdtempSync(join(tmpdir(), "codecell-bench-"));
cpSync(join(appDir, "demo-workspace"), join(dir, "workspace"), { recursive: true });
const configPath = join(dir, "codecell.json5");
writeFileSync(
  configPath,
  JSON.stringify({
    tools: { codeMode: { enabled: true } },
    workspace: "./workspace",
    plugins: ["@codecell/plugin-example-notes"],
    mcpServers: {
      memory: {
        package: "@modelcontextprotocol/server-memory",
        env: { MEMORY_FILE_PATH: join(dir, "memory.jsonl") },
      },
    },
  }),
);

const CELLS = {
  trivial: "return 1 + 1;",
  "10 MCP calls":
    "let n = 0; for (let i = 0; i < 10; i++) { const g = await MCP.memory.readGraph({}); n += g.structuredContent.entities.length + 1; } return n;",
};

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function measure(client, code) {
  const times = [];
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    const started = performance.now();
    const result = await client.callTool({ name: "exec", arguments: { code } });
    const elapsed = performance.now() - started;
    if (result.structuredContent?.status !== "completed") {
      throw new Error(`cell did not complete: ${JSON.stringify(result.structuredContent).slice(0, 300)}`);
    }
    if (i >= WARMUP) times.push(elapsed);
  }
  times.sort((a, b) => a - b);
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    mean: times.reduce((a, b) => a + b, 0) / times.length,
  };
}

async function withStdio(run) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cli, "serve", "--config", configPath],
    stderr: "ignore",
  });
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(transport);
  try {
    return await run(client);
  } finally {
    await client.close();
  }
}

async function withHttp(run) {
  const child = spawn(process.execPath, [cli, "serve", "--config", configPath, "--http", "0"], {
    stdio: ["ignore", "pipe", "inherit"],
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
  const client = new Client({ name: "bench", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  try {
    return await run(client);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
    child.kill("SIGTERM");
  }
}

const rows = [];
for (const [transportName, connect] of [
  ["stdio", withStdio],
  ["http", withHttp],
]) {
  await connect(async (client) => {
    for (const [cell, code] of Object.entries(CELLS)) {
      const stats = await measure(client, code);
      rows.push({ transport: transportName, cell, iterations: ITERATIONS, ...stats });
    }
  });
}

const fmt = (ms) => `${ms.toFixed(2)} ms`;
console.log(
  `exec latency through MCP, ${ITERATIONS} calls each after ${WARMUP} warm-up calls (Node ${process.versions.node})`,
);
console.log("| transport | cell | p50 | p99 | mean |");
console.log("| --- | --- | --- | --- | --- |");
for (const row of rows)
  console.log(`| ${row.transport} | ${row.cell} | ${fmt(row.p50)} | ${fmt(row.p99)} | ${fmt(row.mean)} |`);
mkdirSync(join(appDir, "bench-results"), { recursive: true });
writeFileSync(
  join(appDir, "bench-results", "gateway.json"),
  `${JSON.stringify({ node: process.versions.node, rows }, null, 2)}\n`,
);
