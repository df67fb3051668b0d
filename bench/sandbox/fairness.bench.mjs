// Fairness benchmark (part of `pnpm --filter @codecell/bench bench:sandbox`): one session spins cells on
// every base worker while another session runs `return 1` cells; prints the polite session's latency
// percentiles with and without the hostile load, and writes bench-results/fairness.json. Bounded: a
// fixed number of polite cells, spinners stopped by abort at the end.
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { createSandboxPool } from "@codecell/sandbox";

const SIZE = 2;
const MAX_WORKERS = 4;
const POLITE_CELLS = 60;
const SPINNERS = 3;
const limits = {
  memoryLimitBytes: 32 << 20,
  maxOutputBytes: 64 << 10,
  maxPendingToolCalls: 16,
  maxSnapshotBytes: 10 << 20,
};
const surface = { allTools: [], toolFunctions: [], mcpServers: [], apiFiles: [], namespaces: [] };

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
};

function start(pool, owner, code, deadlineMs, signal) {
  const run = pool.run({
    owner,
    code,
    language: "javascript",
    surface,
    limits,
    deadlineAt: Date.now() + deadlineMs,
    onRequest: () => {},
    signal,
  });
  return run.next();
}

async function politeLatencies(pool) {
  const latencies = [];
  let failed = 0;
  for (let index = 0; index < POLITE_CELLS; index++) {
    const started = performance.now();
    const event = await start(pool, "polite", "return 1", 30_000);
    latencies.push(performance.now() - started);
    if (event.type !== "completed") failed++;
  }
  return { latencies, failed };
}

const pool = createSandboxPool({ size: SIZE, maxWorkers: MAX_WORKERS });
// Warm both base workers.
await Promise.all([start(pool, "warm", "return 1", 30_000), start(pool, "warm", "return 1", 30_000)]);
const quiet = await politeLatencies(pool);

const stop = new AbortController();
const spinners = Array.from({ length: SPINNERS }, () =>
  start(pool, "hostile", "while (true) {}", 60_000, stop.signal),
);
await new Promise((resolve) => setTimeout(resolve, 200));
const hostile = await politeLatencies(pool);
const workersUnderLoad = pool.stats().workers;
stop.abort();
await Promise.all(spinners);
await pool.close();

const rows = [
  ["polite p50, quiet pool", percentile(quiet.latencies, 0.5)],
  ["polite p99, quiet pool", percentile(quiet.latencies, 0.99)],
  [`polite p50, ${SPINNERS} hostile spinners`, percentile(hostile.latencies, 0.5)],
  [`polite p99, ${SPINNERS} hostile spinners`, percentile(hostile.latencies, 0.99)],
  ["polite max, hostile (first cell waits for a new worker)", Math.max(...hostile.latencies)],
];
const width = Math.max(...rows.map(([name]) => name.length));
const load = loadavg()
  .map((value) => value.toFixed(2))
  .join(" ");
console.log(
  `\nfairness bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${load}; pool size ${SIZE}, maxWorkers ${MAX_WORKERS}, ${POLITE_CELLS} polite cells per phase\n`,
);
console.log(`${"measure".padEnd(width)}  ${"ms".padStart(9)}`);
for (const [name, value] of rows) console.log(`${name.padEnd(width)}  ${value.toFixed(2).padStart(9)}`);
console.log(
  `workers while hostile: ${workersUnderLoad}; polite failures: quiet ${quiet.failed}, hostile ${hostile.failed}`,
);
mkdirSync(new URL("../bench-results/", import.meta.url), { recursive: true });
writeFileSync(
  new URL("../bench-results/fairness.json", import.meta.url),
  `${JSON.stringify(
    {
      node: process.version,
      cpus: availableParallelism(),
      loadAverage: loadavg(),
      date: new Date().toISOString(),
      size: SIZE,
      maxWorkers: MAX_WORKERS,
      spinners: SPINNERS,
      workersWhileHostile: workersUnderLoad,
      failures: { quiet: quiet.failed, hostile: hostile.failed },
      results: rows.map(([name, value]) => ({ name, value, unit: "ms" })),
    },
    null,
    2,
  )}\n`,
);
