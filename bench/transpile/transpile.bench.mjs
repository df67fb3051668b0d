// Benchmark of @codecell/transpile against the built package (turbo builds it first).
// Prints a table and writes bench-results/transpile.json. Run: pnpm --filter @codecell/bench bench:transpile.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { javascriptCellOfLines, typescriptCell, typescriptCellOfLines } from "./cells.mjs";

const benchDirectory = join(dirname(fileURLToPath(import.meta.url)), "..");
const distUrl = import.meta.resolve("@codecell/transpile");
const processRuns = 9;
const warmCalls = 2000;

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const percentile = (values, fraction) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
};

/** Runs `source` (an ES module printing one JSON line) in a fresh Node process. */
function inFreshProcess(source) {
  const output = execFileSync(process.execPath, ["--input-type=module", "-e", source], {
    cwd: benchDirectory,
    encoding: "utf8",
  });
  return JSON.parse(output.trim().split("\n").at(-1));
}

// Each candidate: what the first TypeScript cell costs in a new process (load + first transform).
const firstCellScripts = {
  "@codecell/transpile (sucrase)": `
    const cell = ${JSON.stringify(typescriptCell)};
    const start = performance.now();
    const { prepareCell } = await import(${JSON.stringify(distUrl)});
    const imported = performance.now();
    await prepareCell("return 1 + 1;", "javascript");
    const firstJavaScript = performance.now();
    await prepareCell(cell, "typescript");
    const firstTypeScript = performance.now();
    await prepareCell(cell.replace("urgent", "later"), "typescript");
    const secondTypeScript = performance.now();
    console.log(JSON.stringify({
      packageImport: imported - start,
      firstJavaScriptCell: firstJavaScript - imported,
      firstTypeScriptCell: firstTypeScript - firstJavaScript,
      secondTypeScriptCell: secondTypeScript - firstTypeScript,
      sinceNodeStart: performance.now(),
    }));`,
  // What importing the package costs, split by its two eager dependencies.
  "import acorn alone": `
    const start = performance.now();
    await import("acorn");
    console.log(JSON.stringify({ packageImport: performance.now() - start }));`,
  "import @codecell/contract alone": `
    const start = performance.now();
    await import("@codecell/contract");
    console.log(JSON.stringify({ packageImport: performance.now() - start }));`,
  "sucrase 3.35 alone": `
    const cell = ${JSON.stringify(typescriptCell)};
    const start = performance.now();
    const { transform } = await import("sucrase");
    transform(cell, { transforms: ["typescript"], disableESTransforms: true });
    console.log(JSON.stringify({ firstTypeScriptCell: performance.now() - start }));`,
  "typescript 5.9.3 transpileModule": `
    const cell = ${JSON.stringify(typescriptCell)};
    const start = performance.now();
    const ts = (await import("typescript")).default;
    ts.transpileModule(cell, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } });
    console.log(JSON.stringify({ firstTypeScriptCell: performance.now() - start }));`,
};

const firstCell = {};
for (const name of Object.keys(firstCellScripts)) firstCell[name] = [];
for (let run = 0; run < processRuns; run++) {
  // Interleaved so that noise from the other engineers' jobs on this machine hits every candidate alike.
  for (const [name, script] of Object.entries(firstCellScripts)) firstCell[name].push(inFreshProcess(script));
}

function summarize(samples) {
  const keys = Object.keys(samples[0]);
  return Object.fromEntries(
    keys.map((key) => {
      const values = samples.map((sample) => sample[key]);
      return [key, { median: median(values), min: Math.min(...values) }];
    }),
  );
}

function timePerCall(run) {
  for (let index = 0; index < 200; index++) run();
  const times = [];
  for (let index = 0; index < warmCalls; index++) {
    const start = performance.now();
    run();
    times.push(performance.now() - start);
  }
  return { p50: percentile(times, 0.5), p95: percentile(times, 0.95) };
}

async function timePerAsyncCall(run) {
  for (let index = 0; index < 200; index++) await run();
  const times = [];
  for (let index = 0; index < warmCalls; index++) {
    const start = performance.now();
    await run();
    times.push(performance.now() - start);
  }
  return { p50: percentile(times, 0.5), p95: percentile(times, 0.95) };
}

const { prepareCell, checkModuleAccess } = await import(distUrl);
const { transform } = await import("sucrase");
const ts = (await import("typescript")).default;
const javascript200 = javascriptCellOfLines(200);
const typescript200 = typescriptCellOfLines(200);
const tsOptions = { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } };

const linesKept = (output, input) =>
  output.trimEnd().split("\n").length === input.trimEnd().split("\n").length;
const transpiled = ts.transpileModule(typescript200, tsOptions).outputText;

const warm = {
  "prepareCell typescript, 20-line cell": await timePerAsyncCall(() =>
    prepareCell(typescriptCell, "typescript"),
  ),
  "prepareCell typescript, 200-line cell": await timePerAsyncCall(() =>
    prepareCell(typescript200, "typescript"),
  ),
  "prepareCell javascript, 200-line cell": await timePerAsyncCall(() =>
    prepareCell(javascript200, "javascript"),
  ),
  "checkModuleAccess, 200-line cell": timePerCall(() => checkModuleAccess(javascript200)),
  "sucrase transform alone, 200-line cell": timePerCall(() =>
    transform(typescript200, { transforms: ["typescript"], disableESTransforms: true }),
  ),
  "typescript transpileModule, 200-line cell": timePerCall(() =>
    ts.transpileModule(typescript200, tsOptions),
  ),
};

const results = {
  machine: { node: process.version, cpus: (await import("node:os")).cpus().length },
  firstTypeScriptCellInNewProcess: Object.fromEntries(
    Object.entries(firstCell).map(([name, samples]) => [name, summarize(samples)]),
  ),
  warmPerCallMs: warm,
  linesKeptFor200LineCell: {
    sucrase: linesKept((await prepareCell(typescript200, "typescript")).code, typescript200),
    typescript: linesKept(transpiled, typescript200),
  },
  targets: { firstTypeScriptCellMs: 60, perCellMs: 1 },
};

const format = (value) => value.toFixed(3).padStart(9);
console.log(`\nFirst TypeScript cell in a new process (ms; median and min of ${processRuns} processes)`);
for (const [name, summary] of Object.entries(results.firstTypeScriptCellInNewProcess)) {
  for (const [key, { median: mid, min }] of Object.entries(summary)) {
    console.log(`  ${name.padEnd(34)} ${key.padEnd(22)} ${format(mid)} ${format(min)}`);
  }
}
console.log(`\nWarm, per call (ms; p50 and p95 of ${warmCalls} calls)`);
for (const [name, { p50, p95 }] of Object.entries(warm)) {
  console.log(`  ${name.padEnd(44)} ${format(p50)} ${format(p95)}`);
}
console.log("\nLines kept on the 200-line cell:", JSON.stringify(results.linesKeptFor200LineCell));

mkdirSync(join(benchDirectory, "bench-results"), { recursive: true });
writeFileSync(join(benchDirectory, "bench-results/transpile.json"), `${JSON.stringify(results, null, 2)}\n`);
console.log("\nwrote bench-results/transpile.json");
