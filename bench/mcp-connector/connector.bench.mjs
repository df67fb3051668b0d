// Time to ready for three stdio servers, and sequential calls per second over stdio and HTTP.
// Run after a build: `pnpm --filter @codecell/bench bench:mcp-connector`.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createMcpConnector } from "@codecell/mcp-connector";

const require = createRequire(import.meta.url);
const benchDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const packageDir = resolve(benchDir, "..", "packages", "mcp-connector");
function bin(name) {
  const manifestPath = require.resolve(`${name}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  return join(
    dirname(manifestPath),
    typeof manifest.bin === "string" ? manifest.bin : Object.values(manifest.bin)[0],
  );
}
const everything = bin("@modelcontextprotocol/server-everything");
const scratch = mkdtempSync(join(tmpdir(), "codecell-mcp-bench-"));
const CALLS = 1000;
const rows = [];

async function timeCalls(connector, server, label) {
  for (let i = 0; i < 20; i++) await connector.callTool(server, "echo", { message: "warm" });
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) await connector.callTool(server, "echo", { message: `call ${i}` });
  const ms = performance.now() - start;
  rows.push({
    case: label,
    value: Math.round((CALLS / ms) * 1000),
    unit: "calls/s",
    detail: `${(ms / CALLS).toFixed(3)} ms per call`,
  });
}

// Three stdio servers, connected at once, with tools, resources and prompts listed.
const startedAt = performance.now();
const stdio = createMcpConnector({
  everything: { command: process.execPath, args: [everything, "stdio"] },
  memory: {
    command: process.execPath,
    args: [bin("@modelcontextprotocol/server-memory")],
    env: { MEMORY_FILE_PATH: join(scratch, "m.jsonl") },
  },
  control: { command: process.execPath, args: [join(packageDir, "test/fixtures/control-server.mjs")] },
});
await stdio.start();
await stdio.listResources("everything");
await stdio.listPrompts("everything");
const readyMs = performance.now() - startedAt;
const toolCount = stdio.hostTools().length;
rows.push({
  case: "3 stdio servers to ready, all listed",
  value: Math.round(readyMs),
  unit: "ms",
  detail: `${toolCount} tools`,
});
await timeCalls(stdio, "everything", "sequential echo calls over stdio");
await stdio.close();

// The same over Streamable HTTP, server bound to 127.0.0.1 on a free port.
const child = spawn(
  process.execPath,
  ["--import", join(packageDir, "test/fixtures/listen-on-localhost.mjs"), everything, "streamableHttp"],
  {
    env: { ...process.env, PORT: "0" },
    stdio: ["ignore", "ignore", "pipe"],
  },
);
const port = await new Promise((resolvePort, reject) => {
  let output = "";
  child.stderr.on("data", (chunk) => {
    output += chunk;
    const match = /CODECELL_TEST_PORT=(\d+)/.exec(output);
    if (match) resolvePort(Number(match[1]));
  });
  child.once("exit", (code) => reject(new Error(`HTTP server exited with ${code}: ${output}`)));
});
const http = createMcpConnector({ everything: { url: `http://127.0.0.1:${port}/mcp` } });
await http.start();
await timeCalls(http, "everything", "sequential echo calls over Streamable HTTP");
await http.close();
child.kill();
rmSync(scratch, { recursive: true, force: true });

console.table(rows);
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "mcp-connector.json"),
  JSON.stringify({ node: process.version, calls: CALLS, rows }, null, 2),
);
