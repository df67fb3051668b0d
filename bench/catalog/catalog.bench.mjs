// Catalog of 1,000 tools: build time, search p50/p95 and describe time, over the built package.
// Run with `pnpm bench` (turbo builds first). Prints a table and writes bench-results/catalog.json.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { buildToolCatalog } from "@codecell/catalog";

const here = dirname(fileURLToPath(import.meta.url));
const catalogsFolder = resolve(here, "..", "..", "fixtures", "mcp-catalogs");

function realMcpTools() {
  const tools = [];
  for (const file of readdirSync(catalogsFolder)
    .filter((name) => name.endsWith(".json"))
    .sort()) {
    const captured = JSON.parse(readFileSync(join(catalogsFolder, file), "utf8"));
    for (const tool of captured.tools) {
      tools.push({
        name: tool.name,
        label: tool.title ?? tool.annotations?.title,
        description: tool.description ?? "",
        parameters: tool.inputSchema,
        source: "mcp",
        owner: captured.server,
      });
    }
  }
  return tools;
}

// Synthetic tools fill the catalog up to 1,000 with plausible, varied names and descriptions.
const verbs = [
  "list",
  "get",
  "create",
  "update",
  "delete",
  "search",
  "export",
  "import",
  "sync",
  "archive",
  "approve",
  "assign",
];
const nouns = [
  "invoice",
  "customer",
  "ticket",
  "order",
  "shipment",
  "contract",
  "employee",
  "project",
  "report",
  "calendar_event",
  "payment",
  "document",
  "lead",
  "campaign",
  "asset",
];
const services = [
  "billing",
  "crm",
  "helpdesk",
  "erp",
  "hr",
  "warehouse",
  "finance",
  "marketing",
  "legal",
  "ops",
];
const sources = ["plugin", "mcp", "client", "core"];

function syntheticTools(count) {
  const tools = [];
  for (let index = 0; tools.length < count; index++) {
    const verb = verbs[index % verbs.length];
    const noun = nouns[Math.floor(index / verbs.length) % nouns.length];
    const service = services[Math.floor(index / (verbs.length * nouns.length)) % services.length];
    const source = sources[index % sources.length];
    tools.push({
      name: `${service}_${verb}_${noun}`,
      label: `${verb} ${noun.replace("_", " ")}`,
      description: `${verb[0].toUpperCase()}${verb.slice(1)} a ${noun.replace("_", " ")} in the ${service} system. Returns the ${noun.replace("_", " ")} record with its id, status and timestamps; fails when the caller lacks ${service} access.`,
      parameters: { type: "object", properties: { id: { type: "string" }, filter: { type: "object" } } },
      source,
      owner: `${service}-${index % 3}`,
    });
  }
  return tools;
}

const core = ["read_file", "write_file", "list_dir", "exec", "web_search", "web_fetch", "message"].map(
  (name) => ({
    name,
    description: `The host's ${name.replace("_", " ")} tool.`,
    parameters: { type: "object" },
    source: "core",
    owner: "host",
  }),
);
const real = [...realMcpTools(), ...core];
const tools = [...real, ...syntheticTools(1000 - real.length)];

function percentile(sorted, fraction) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
}
function measure(runs, action) {
  const times = [];
  for (let run = 0; run < runs; run++) {
    const start = performance.now();
    action(run);
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 0.5), p95: percentile(times, 0.95), runs };
}

const queries = [
  "read local file",
  "open a web page and click a button",
  "remember a fact about a person",
  "create a github issue",
  "export customer invoices",
  "approve payment",
  "list open tickets",
  "take a screenshot",
  "merge a PR",
  "search the web",
  "update shipment status",
  "delete an employee record",
  "wirte file",
  "calend",
];

for (let warm = 0; warm < 5; warm++) buildToolCatalog(tools);
const build = measure(30, () => buildToolCatalog(tools));
const catalog = buildToolCatalog(tools);
for (const query of queries) catalog.search(query, { includeMcp: true });
const searchGuest = measure(queries.length * 40, (run) => catalog.search(queries[run % queries.length]));
const searchHost = measure(queries.length * 40, (run) =>
  catalog.search(queries[run % queries.length], { includeMcp: true }),
);
const ids = catalog.guestEntries.map((entry) => entry.id);
const describeById = measure(5000, (run) => catalog.describe(ids[run % ids.length]));
const names = catalog.guestEntries.map((entry) => entry.name);
const describeByName = measure(5000, (run) => {
  try {
    catalog.describe(names[run % names.length]);
  } catch {
    // an ambiguous name is a fair outcome here: the lookup still ran
  }
});

const rows = [
  ["build (1,000 tools)", build, 30],
  ["search, guest view", searchGuest, 0.5],
  ["search, MCP included", searchHost, 0.5],
  ["describe by id", describeById, 0.05],
  ["describe by name", describeByName, 0.05],
];
console.log(
  `catalog bench: ${tools.length} tools (${catalog.entries.length} catalogued), Node ${process.version}`,
);
console.log("| measure | p50 ms | p95 ms | budget ms | runs |");
console.log("|---|---:|---:|---:|---:|");
for (const [label, result, budget] of rows) {
  console.log(
    `| ${label} | ${result.p50.toFixed(4)} | ${result.p95.toFixed(4)} | ${budget} | ${result.runs} |`,
  );
}
const results = {
  tools: tools.length,
  catalogued: catalog.entries.length,
  node: process.version,
  measures: Object.fromEntries(
    rows.map(([label, result, budget]) => [label, { ...result, budgetMs: budget }]),
  ),
};
mkdirSync(resolve(here, "..", "bench-results"), { recursive: true });
writeFileSync(resolve(here, "..", "bench-results", "catalog.json"), `${JSON.stringify(results, null, 2)}\n`);
