// The type check's first cell through the engine, each case in a process of its own (nothing warm): a
// strict engine is made, a run with the 97 real MCP tools of fixtures/mcp-catalogs is prepared, and its
// first cell (a correct one that calls a tool) is sent at once, or after a pause as a model's first
// reply takes; beside the same with typecheck off. Prints a table and writes
// bench-results/typecheck-first.json. Run after a build: node bench/engine/typecheck-first.bench.mjs.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const RUNS = Number(process.env.TYPECHECK_FIRST_RUNS ?? 3);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

if (process.argv[2] === "case") {
  const [, , , typecheck, pauseMs] = process.argv;
  const { createCodeModeEngine } = await import("@codecell/engine");
  const catalogsDir = join(here, "../../fixtures/mcp-catalogs");
  const tools = [];
  const mcpServers = [];
  for (const file of readdirSync(catalogsDir).filter((name) => name.endsWith(".json"))) {
    const data = JSON.parse(readFileSync(join(catalogsDir, file), "utf8"));
    const server = file.replace(/\.json$/, "");
    mcpServers.push({ name: server, tools: data.tools, resources: false, prompts: false });
    for (const tool of data.tools) {
      tools.push({
        name: tool.name,
        description: tool.description ?? "",
        parameters: tool.inputSchema,
        source: "mcp",
        owner: server,
      });
    }
  }
  tools.push({
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    source: "core",
    owner: "host",
  });
  const executor = { callTool: async (call) => ({ path: call.input.path, content: "text" }) };
  const context = { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" };
  const engine = createCodeModeEngine({ config: { enabled: true, typecheck, timeoutMs: 60_000 } });
  const startedAt = performance.now();
  const run = engine.prepareRun({ tools, mcpServers, context, executor });
  await new Promise((resolve) => setTimeout(resolve, Number(pauseMs)));
  const sentAt = performance.now();
  const result = await run.exec(
    {
      code: 'const file = await tools.read_file({ path: "README.md" });\nconst hits = await tools.search("issues", { limit: 3 });\nreturn { chars: file.content.length, hits: hits.length };',
    },
    { toolCallId: "first" },
  );
  if (result.status !== "completed" || result.diagnostics || result.typecheckNote) {
    throw new Error(JSON.stringify(result));
  }
  const execMs = performance.now() - sentAt;
  await engine.close();
  console.log(JSON.stringify({ execMs, sincePrepareMs: performance.now() - startedAt }));
} else {
  const measure = (typecheck, pauseMs) => {
    const runs = [];
    for (let index = 0; index < RUNS; index++) {
      const out = execFileSync(
        process.execPath,
        [fileURLToPath(import.meta.url), "case", typecheck, String(pauseMs)],
        {
          encoding: "utf8",
        },
      );
      runs.push(JSON.parse(out.trim().split("\n").at(-1)).execMs);
    }
    return { median: median(runs), runs };
  };
  const cases = {
    "off, sent at once": measure("off", 0),
    "strict, sent at once": measure("strict", 0),
    "strict, sent 1 s after prepareRun": measure("strict", 1000),
    "strict, sent 3 s after prepareRun": measure("strict", 3000),
  };
  const results = {
    measuredAt: new Date().toISOString(),
    node: process.version,
    loadAverage: loadavg()[0],
    firstExecMs: cases,
  };
  console.log(`first exec through the engine (97 real MCP tools; load ${results.loadAverage.toFixed(1)})`);
  console.table(
    Object.fromEntries(
      Object.entries(cases).map(([name, { median: value, runs }]) => [
        name,
        { median: `${value.toFixed(0)} ms`, runs: runs.map((run) => run.toFixed(0)).join(", ") },
      ]),
    ),
  );
  mkdirSync(join(here, "../bench-results"), { recursive: true });
  writeFileSync(join(here, "../bench-results/typecheck-first.json"), `${JSON.stringify(results, null, 2)}\n`);
}
