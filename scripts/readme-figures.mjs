#!/usr/bin/env node
// Writes measured figures into the root README, so the numbers there come from a bench run and are never
// typed by hand. Reads bench/bench-results/engine.json (written by
// `pnpm --filter @codecell/bench bench:engine`) and replaces the block between
// <!-- figures:engine-surface:start --> and <!-- figures:engine-surface:end -->.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));

/** The markdown table for the model-surface rows of an engine bench result. */
export function surfaceTable(bench) {
  const rows = bench.surface.map((row) => {
    const saved = 1 - row.code_mode_tokens / row.direct_tokens;
    return `| ${row.catalog} | ${row.direct_tokens.toLocaleString("en")} | ${row.code_mode_tokens.toLocaleString("en")} | ${(saved * 100).toFixed(1)}% |`;
  });
  const lines = [
    "| tools behind codecell | shown directly | through codecell (exec + wait) | saved |",
    "|---|---:|---:|---:|",
    ...rows,
    "",
  ];
  const [first] = bench.surface;
  if (first?.with_output_schema_tokens !== undefined) {
    lines.push(
      `With the one small \`outputSchema\` exec and wait share (what an MCP client also receives), the first row is ${first.with_output_schema_tokens.toLocaleString("en")} tokens.`,
    );
  }
  if (bench.resultText) {
    lines.push(
      `The text of a \`return 1\` result, which the model reads, is ${bench.resultText.return_1_text_chars} characters; the full result with telemetry (${bench.resultText.return_1_full_json_chars} characters) travels as \`structuredContent\`.`,
    );
  }
  if (lines.at(-1) !== "") lines.push("");
  lines.push(`Measured ${bench.date.slice(0, 10)} on Node ${bench.node}.`);
  return lines.join("\n");
}

/** Replaces the text between a named pair of markers. */
export function replaceBlock(text, name, body) {
  const start = `<!-- figures:${name}:start -->`;
  const end = `<!-- figures:${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from === -1 || to < from) throw new Error(`README has no ${start} ... ${end} block`);
  return `${text.slice(0, from + start.length)}\n${body}\n${text.slice(to)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const benchFile = join(root, "bench", "bench-results", "engine.json");
  let bench;
  try {
    bench = JSON.parse(readFileSync(benchFile, "utf8"));
  } catch {
    console.error(
      `readme-figures: ${benchFile} is missing; run pnpm --filter @codecell/bench bench:engine first.`,
    );
    process.exit(1);
  }
  const readme = join(root, "README.md");
  writeFileSync(readme, replaceBlock(readFileSync(readme, "utf8"), "engine-surface", surfaceTable(bench)));
  console.log(`readme-figures: README.md updated from ${benchFile}`);
}
