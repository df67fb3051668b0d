// Declaration rendering for 500 real tools (the eight captured catalogs, repeated across servers).
// Run after a build: `pnpm --filter @codecell/bench bench:mcp-declarations`.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createApiFileTable, renderMcpDeclarations } from "@codecell/mcp-declarations";

const benchDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const catalogDir = resolve(benchDir, "../fixtures/mcp-catalogs");
const realTools = readdirSync(catalogDir)
  .filter((name) => name.endsWith(".json"))
  .sort()
  .flatMap((name) => JSON.parse(readFileSync(join(catalogDir, name), "utf8")).tools);

const servers = [];
for (let index = 0; index < 500; index++) {
  const serverIndex = Math.floor(index / 50);
  servers[serverIndex] ??= { name: `server-${serverIndex}`, tools: [], resources: true, prompts: false };
  servers[serverIndex].tools.push(realTools[index % realTools.length]);
}

function measure(label, iterations, run) {
  for (let i = 0; i < 3; i++) run();
  const samples = [];
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return {
    label,
    iterations,
    medianMs: samples[Math.floor(samples.length / 2)],
    p95Ms: samples[Math.floor(samples.length * 0.95)],
  };
}

let declarations;
const rows = [
  measure("render 500 tools (10 servers)", 30, () => {
    declarations = renderMcpDeclarations(servers);
  }),
  measure("render 100 tools (2 servers)", 30, () => {
    renderMcpDeclarations(servers.slice(0, 2));
  }),
];
const table = createApiFileTable(declarations.files);
rows.push(
  measure("API.list + read every file", 200, () => {
    for (const file of table.list("mcp")) table.read(file.path);
  }),
);

const bytes = declarations.files.reduce((sum, file) => sum + Buffer.byteLength(file.content), 0);
console.table(
  rows.map((row) => ({ ...row, medianMs: row.medianMs.toFixed(2), p95Ms: row.p95Ms.toFixed(2) })),
);
console.log(
  `500 tools -> ${declarations.files.length} files, ${(bytes / 1024).toFixed(1)} KiB of declarations`,
);
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "mcp-declarations.json"),
  JSON.stringify({ node: process.version, rows, files: declarations.files.length, bytes }, null, 2),
);
