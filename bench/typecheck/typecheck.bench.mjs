// The type check's cost: the first check after start (a fresh worker: thread, compiler, library,
// declarations, the check), warm checks of a 30-line cell against the 97 real tools and against 1,000
// synthetic ones, what the checker adds to the process's memory, and how long the host's event loop is
// held meanwhile. Prints a table and writes bench-results/typecheck.json. Run: pnpm --filter @codecell/bench bench:typecheck.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CellChecker, guestDeclarations } from "@codecell/typecheck";
import { realGuest, syntheticGuest, thirtyLineCell } from "./guests.mjs";

const benchDirectory = join(dirname(fileURLToPath(import.meta.url)), "..");
const WARM_CHECKS = Number(process.env.TYPECHECK_BENCH_CHECKS ?? 120);
const FIRST_CHECK_RUNS = 3;

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const ms = (value) => `${value.toFixed(1)} ms`;
const mb = (bytes) => `${(bytes / 1048576).toFixed(0)} MB`;

/** The longest the host's event loop went without a turn while `work` ran. */
async function longestBlock(work) {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 2);
  try {
    const value = await work();
    return { value, longest };
  } finally {
    clearInterval(timer);
  }
}

const real = guestDeclarations(realGuest());
const synthetic = guestDeclarations(syntheticGuest(1000));

// The first check after start, each with a new worker (and so a fresh compiler).
const firstChecks = [];
let blockMs = 0;
for (let run = 0; run < FIRST_CHECK_RUNS; run++) {
  const checker = new CellChecker();
  const { value, longest } = await longestBlock(() =>
    checker.check({ declarations: real, code: thirtyLineCell(run), language: "javascript" }),
  );
  if (value.status !== "checked" || value.total !== 0)
    throw new Error(`first check: ${JSON.stringify(value)}`);
  firstChecks.push(value.durationMs);
  blockMs = Math.max(blockMs, longest);
  await checker.close();
}

// The same after the host's warm-up (the engine's warmUp() with typecheck on): the cell comes 1 s later.
const warmedFirstChecks = [];
for (let run = 0; run < FIRST_CHECK_RUNS; run++) {
  const checker = new CellChecker();
  await checker.warmUp();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const value = await checker.check({
    declarations: real,
    code: thirtyLineCell(run),
    language: "javascript",
  });
  if (value.status !== "checked" || value.total !== 0)
    throw new Error(`warmed check: ${JSON.stringify(value)}`);
  warmedFirstChecks.push(value.durationMs);
  await checker.close();
}

// The engine's way since a run is prepared: prepare() with the run's declarations (the worker loads the
// compiler and builds their checker while the model writes), the first cell 1 s later; and how long
// prepare() itself takes from a new worker (the time a cell sent at once waits at most).
const preparedFirstChecks = [];
const prepareTimes = [];
for (let run = 0; run < FIRST_CHECK_RUNS; run++) {
  const checker = new CellChecker();
  const startedAt = performance.now();
  await checker.prepare(real);
  prepareTimes.push(performance.now() - startedAt);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const value = await checker.check({
    declarations: real,
    code: thirtyLineCell(run),
    language: "javascript",
  });
  if (value.status !== "checked" || value.total !== 0)
    throw new Error(`prepared check: ${JSON.stringify(value)}`);
  preparedFirstChecks.push(value.durationMs);
  await checker.close();
}

global.gc?.();
const rssBefore = process.memoryUsage().rss;
const checker = new CellChecker();

async function warm(declarations, label) {
  const first = await checker.check({ declarations, code: thirtyLineCell(-1), language: "javascript" });
  if (first.status !== "checked" || first.total !== 0) throw new Error(`${label}: ${JSON.stringify(first)}`);
  const times = [];
  let longest = 0;
  for (let index = 0; index < WARM_CHECKS; index++) {
    // A new text each time (a model's next cell), in both languages.
    const language = index % 4 === 3 ? "typescript" : "javascript";
    const measured = await longestBlock(() =>
      checker.check({ declarations, code: thirtyLineCell(index), language }),
    );
    if (measured.value.status !== "checked") throw new Error(`${label}: ${measured.value.reason}`);
    times.push(measured.value.durationMs);
    longest = Math.max(longest, measured.longest);
  }
  return {
    firstForDeclarations: first.durationMs,
    p50: percentile(times, 50),
    p90: percentile(times, 90),
    p99: percentile(times, 99),
    max: Math.max(...times),
    longestEventLoopBlock: longest,
  };
}

const realWarm = await warm(real, "97 tools");
const syntheticWarm = await warm(synthetic, "1,000 tools");
const rssAfter = process.memoryUsage().rss;
await checker.close();

// For comparison, what the check costs when every cell gets a fresh program (and type checker), as a
// language service does: the same cells, same options, in this thread.
const ts = createRequire(import.meta.url)("typescript");
const options = {
  target: ts.ScriptTarget.ESNext,
  lib: ["lib.esnext.d.ts"],
  types: [],
  noEmit: true,
  allowJs: true,
  checkJs: true,
  skipLibCheck: true,
  noResolve: true,
};
const host = ts.createCompilerHost(options);
const cached = new Map();
const baseGetSourceFile = host.getSourceFile;
let cellText = "";
host.getSourceFile = (name, version) => {
  if (name === "/cell.js") return ts.createSourceFile(name, cellText, version, true);
  if (!cached.has(name)) {
    cached.set(
      name,
      name === "/globals.d.ts"
        ? ts.createSourceFile(name, real.text, version, true)
        : baseGetSourceFile(name, version),
    );
  }
  return cached.get(name);
};
let previous;
const freshProgramTimes = [];
for (let index = 0; index < 12; index++) {
  cellText = `async function cell() {\n${thirtyLineCell(index)}\n}\nexport {};\n`;
  const startedAt = performance.now();
  const program = ts.createProgram({
    rootNames: ["/globals.d.ts", "/cell.js"],
    options,
    host,
    oldProgram: previous,
  });
  program.getSemanticDiagnostics(program.getSourceFile("/cell.js"));
  if (index > 1) freshProgramTimes.push(performance.now() - startedAt);
  previous = program;
}

// CPU time, each in a process of its own (see cpu-time.mjs): the load-independent figures.
const cpuTime = (guest, checks) =>
  JSON.parse(
    execFileSync(process.execPath, [join(benchDirectory, "typecheck/cpu-time.mjs"), guest, String(checks)], {
      encoding: "utf8",
    }),
  );
const cpuReal = cpuTime("real", 60);
const cpuSynthetic = cpuTime("synthetic", 40);

const results = {
  measuredAt: new Date().toISOString(),
  node: process.version,
  cores: availableParallelism(),
  loadAverage: loadavg()[0],
  warmChecks: WARM_CHECKS,
  declarationChars: { realTools: real.text.length, syntheticTools: synthetic.text.length },
  firstCheckMs: { runs: firstChecks, median: percentile(firstChecks, 50) },
  firstCheckAfterWarmUpMs: { runs: warmedFirstChecks, median: percentile(warmedFirstChecks, 50) },
  firstCheckAfterPrepareMs: { runs: preparedFirstChecks, median: percentile(preparedFirstChecks, 50) },
  prepareFromNewWorkerMs: { runs: prepareTimes, median: percentile(prepareTimes, 50) },
  firstCheckLongestEventLoopBlockMs: blockMs,
  warm97Tools: realWarm,
  warm1000Tools: syntheticWarm,
  freshProgramPerCellP50Ms: percentile(freshProgramTimes, 50),
  memoryAddedBytes: rssAfter - rssBefore,
  cpuTimeInline97Tools: cpuReal,
  cpuTimeInline1000Tools: cpuSynthetic,
};

console.log(
  `typecheck bench (Node ${process.version}, ${results.cores} cores, load ${results.loadAverage.toFixed(1)})`,
);
console.table({
  "first check after start (new worker, 97 tools)": {
    median: ms(results.firstCheckMs.median),
    runs: results.firstCheckMs.runs.map(ms).join(", "),
  },
  "first check after warmUp() (97 tools)": {
    median: ms(results.firstCheckAfterWarmUpMs.median),
    runs: results.firstCheckAfterWarmUpMs.runs.map(ms).join(", "),
  },
  "prepare(97 tools) from a new worker": {
    median: ms(results.prepareFromNewWorkerMs.median),
    runs: results.prepareFromNewWorkerMs.runs.map(ms).join(", "),
  },
  "first check after prepare() (97 tools)": {
    median: ms(results.firstCheckAfterPrepareMs.median),
    runs: results.firstCheckAfterPrepareMs.runs.map(ms).join(", "),
  },
  "warm, 30-line cell, 97 real tools": {
    p50: ms(realWarm.p50),
    p99: ms(realWarm.p99),
    max: ms(realWarm.max),
  },
  "first cell against 1,000 tools (new declarations)": { median: ms(syntheticWarm.firstForDeclarations) },
  "warm, 30-line cell, 1,000 synthetic tools": {
    p50: ms(syntheticWarm.p50),
    p99: ms(syntheticWarm.p99),
    max: ms(syntheticWarm.max),
  },
  "CPU time inline, 97 tools (first; warm)": {
    median: ms(cpuReal.firstCpuMs),
    p50: ms(cpuReal.warmCpuP50Ms),
    p99: ms(cpuReal.warmCpuP99Ms),
  },
  "CPU time inline, 1,000 tools (first; warm)": {
    median: ms(cpuSynthetic.firstCpuMs),
    p50: ms(cpuSynthetic.warmCpuP50Ms),
    p99: ms(cpuSynthetic.warmCpuP99Ms),
  },
  "fresh program per cell (not used), 97 tools": { p50: ms(results.freshProgramPerCellP50Ms) },
});
console.log(
  `memory the checker adds (process RSS, both declaration sets warm): ${mb(results.memoryAddedBytes)}`,
);
console.log(
  `longest event-loop block of the host: first check ${ms(blockMs)}, warm ${ms(Math.max(realWarm.longestEventLoopBlock, syntheticWarm.longestEventLoopBlock))}`,
);
mkdirSync(join(benchDirectory, "bench-results"), { recursive: true });
writeFileSync(join(benchDirectory, "bench-results/typecheck.json"), `${JSON.stringify(results, null, 2)}\n`);
console.log("\nwrote bench-results/typecheck.json");
