// End-to-end exec latency through the MCP protocol: the built CLI spawned as a real server, driven by
// the SDK client over stdio and over Streamable HTTP on 127.0.0.1. Run `pnpm --filter @codecell/gateway
// bench` (it builds first through turbo). Prints a table and writes bench-results/gateway.json.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  benchDir,
  benchWorkspace,
  BENCH_CELLS as CELLS,
  cli,
  memoryServer,
  percentile,
  startHttpGateway,
} from "./http-gateway.mjs";

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const WARMUP = 20;

const { configPath } = benchWorkspace("codecell-bench-", (dir) => ({
  tools: { codeMode: { enabled: true } },
  plugins: ["@codecell/plugin-example-notes"],
  mcpServers: { memory: memoryServer(dir) },
}));

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
  const { child, url } = await startHttpGateway(configPath, "inherit");
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
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "gateway.json"),
  `${JSON.stringify({ node: process.versions.node, rows }, null, 2)}\n`,
);
