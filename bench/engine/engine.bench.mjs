// Engine benchmarks: nested-call throughput inside one cell, parallel calls, the overhead of
// exec -> waiting -> wait -> completed, and the model surface in tokens (o200k_base) against exposing
// the same tools directly. Prints a table and writes bench-results/engine.json. Run after a build.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { codeModeResultOutputSchema, codeModeResultText } from "@codecell/contract";
import { createCodeModeEngine } from "@codecell/engine";
import { encode } from "gpt-tokenizer/encoding/o200k_base";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "../..");
const catalogsDir = join(repoRoot, "fixtures/mcp-catalogs");
const context = { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" };
const tool = (name, description, source = "core", owner = "host") => ({
  name,
  description,
  parameters: { type: "object", properties: { value: { type: "number" } } },
  source,
  owner,
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const executor = {
  async callTool(call) {
    if (call.tool.name === "sleep50") await sleep(50);
    if (call.tool.name === "sleep300") await sleep(300);
    return call.input?.value ?? 0;
  },
};
const tools = [
  tool("inc", "Return the value"),
  tool("sleep50", "Wait 50 ms"),
  tool("sleep300", "Wait 300 ms"),
];

const rows = [];
const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 60_000 } });
const run = engine.prepareRun({ tools, context, executor });
let callId = 0;
const exec = (code) => run.exec({ code }, { toolCallId: `b${++callId}` });
// Warm the pool and the JIT (one run of each cell shape) before measuring.
await exec("return 1");
await exec("let s = 0; for (let i = 0; i < 1000; i++) s += await tools.inc({ value: 1 }); return s;");

async function measure(name, target, repeats, body) {
  const samples = [];
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    const own = await body();
    // A body that returns a number timed the part that counts itself (a pause before it is not the cell's).
    samples.push(typeof own === "number" ? own : performance.now() - started);
  }
  rows.push({ name, median_ms: Number(median(samples).toFixed(2)), target });
}

await measure("1,000 sequential nested calls in one cell", "<= 100 ms", 5, async () => {
  const result = await exec(
    "let s = 0; for (let i = 0; i < 1000; i++) s += await tools.inc({ value: 1 }); return s;",
  );
  if (result.value !== 1000) throw new Error(JSON.stringify(result));
});
await measure("16 parallel calls of a 50 ms tool", "<= 80 ms", 5, async () => {
  const result = await exec(
    "return (await Promise.all(Array.from({ length: 16 }, () => tools.sleep50({ value: 1 })))).length;",
  );
  if (result.value !== 16) throw new Error(JSON.stringify(result));
});

await measure(
  "Promise.all over 64 calls of a 50 ms tool (16 at once, the rest queued)",
  "<= 260 ms",
  5,
  async () => {
    const result = await exec(
      "return (await Promise.all(Array.from({ length: 64 }, () => tools.sleep50({ value: 1 })))).length;",
    );
    if (result.value !== 64) throw new Error(JSON.stringify(result));
  },
);

// A slow tool that outlives exec: exec -> waiting -> wait -> completed, minus the tool's own 300 ms.
const slowEngine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 100 }, pool: engine.pool });
const slowRun = slowEngine.prepareRun({ tools, context, executor });
await measure(
  "slow tool: exec -> waiting -> wait -> completed, overhead beyond 300 ms",
  "<= 15 ms",
  5,
  async () => {
    const started = performance.now();
    const first = await slowRun.exec(
      { code: "return await tools.sleep300({ value: 7 })" },
      { toolCallId: `s${++callId}` },
    );
    if (first.status !== "waiting") throw new Error(JSON.stringify(first));
    // The model's turn would happen here; wait for the tool to be nearly done, then call wait.
    await sleep(Math.max(0, 290 - (performance.now() - started)));
    const second = await slowRun.wait({ runId: first.runId }, { toolCallId: `s${++callId}` });
    if (second.status !== "completed") throw new Error(JSON.stringify(second));
  },
);
rows.at(-1).median_ms = Number((rows.at(-1).median_ms - 300).toFixed(2));

// Model surface in tokens.
const tokens = (definitions) => encode(JSON.stringify(definitions)).length;
const direct = (list) =>
  list.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
// What a model provider is given for exec and wait; an MCP client also gets their shared outputSchema.
const surfaceTokens = (hostTools, mcpServers = [], withOutputSchema = false) => {
  const prepared = engine.prepareRun({ tools: hostTools, mcpServers, context, executor });
  return tokens(
    prepared.modelTools.map((t) => ({
      name: t.name,
      description: t.description,
      input_schema: t.inputSchema,
      ...(withOutputSchema ? { output_schema: codeModeResultOutputSchema } : {}),
    })),
  );
};
const catalogs = readdirSync(catalogsDir).filter((file) => file.endsWith(".json"));
const realTools = [];
const realServers = [];
for (const file of catalogs) {
  const data = JSON.parse(readFileSync(join(catalogsDir, file), "utf8"));
  const server = file.replace(/\.json$/, "");
  realServers.push({ name: server, tools: data.tools, resources: false, prompts: false });
  for (const t of data.tools) {
    realTools.push({
      name: t.name,
      description: t.description ?? "",
      parameters: t.inputSchema,
      source: "mcp",
      owner: server,
    });
  }
}
const synthetic = (count) =>
  Array.from({ length: count }, (_, i) =>
    tool(
      `tool_${i}`,
      `Synthetic tool number ${i} that does one specific thing with its input value.`,
      "plugin",
      `p${i % 10}`,
    ),
  );
const surfaces = [
  {
    catalog: `real MCP catalogs (${realTools.length} tools, ${realServers.length} servers)`,
    hostTools: realTools,
    servers: realServers,
  },
  { catalog: "synthetic 100 tools", hostTools: synthetic(100), servers: [] },
  { catalog: "synthetic 1,000 tools", hostTools: synthetic(1000), servers: [] },
];
// A trivial cell with a large catalog: every fresh VM is given the whole surface (a function for each
// tool and its aliases, ALL_TOOLS, each MCP server's namespace and declarations), so a cell's fixed cost
// grows with the catalog.
for (const { catalog, hostTools, servers } of surfaces) {
  const large = engine.prepareRun({ tools: hostTools, mcpServers: servers, context, executor });
  const execLarge = (code) => large.exec({ code }, { toolCallId: `l${++callId}` });
  for (let i = 0; i < 20; i++) await execLarge("return 1");
  await measure(`\`return 1\` with ${catalog} (median of 30)`, "reported", 30, async () => {
    const result = await execLarge("return 1");
    if (result.value !== 1) throw new Error(JSON.stringify(result));
  });
  // With a pause before each cell, as between a model's turns: the worker has applied the surface to
  // its next VM by the time the cell comes (the sandbox's spares), so the cell skips that work.
  await measure(
    `\`return 1\` with ${catalog}, 30 ms between cells (median of 30)`,
    "reported",
    30,
    async () => {
      await sleep(30);
      const started = performance.now();
      const result = await execLarge("return 1");
      if (result.value !== 1) throw new Error(JSON.stringify(result));
      return performance.now() - started;
    },
  );
}

const tokenRows = surfaces.map(({ catalog, hostTools, servers }) => ({
  catalog,
  direct_tokens: tokens(direct(hostTools)),
  code_mode_tokens: surfaceTokens(hostTools, servers),
  with_output_schema_tokens: surfaceTokens(hostTools, servers, true),
}));

// The result text a model reads (telemetry stays in the structured result) against the full JSON.
const returnOne = await exec("return 1");
const resultText = {
  return_1_text_chars: codeModeResultText(returnOne).length,
  return_1_full_json_chars: JSON.stringify(returnOne).length,
};

await slowEngine.close();
await engine.close();

console.log("\nengine benchmarks (median of 5 unless the row says otherwise)");
console.table(rows);
console.log("model surface, o200k_base tokens (target: code mode <= 500)");
console.table(tokenRows);
console.log("result text of `return 1`, characters (target: < 160)");
console.table([resultText]);
mkdirSync(join(here, "../bench-results"), { recursive: true });
writeFileSync(
  join(here, "../bench-results/engine.json"),
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), timings: rows, surface: tokenRows, resultText }, null, 2)}\n`,
);
