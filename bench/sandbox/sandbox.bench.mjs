// Sandbox benchmark: `pnpm --filter @codecell/bench bench:sandbox` (builds first). Prints a table and writes
// bench-results/sandbox.json. Runs against the built package, as a host would.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createSandboxPool } from "@codecell/sandbox";

const limits = {
  memoryLimitBytes: 64 << 20,
  maxOutputBytes: 8 << 20,
  maxPendingToolCalls: 128,
  maxSnapshotBytes: 10 << 20,
};
const surface = {
  allTools: [{ id: "core:host:list", name: "list", description: "List things", source: "core" }],
  toolFunctions: [{ name: "list", toolId: "core:host:list" }],
  mcpServers: [],
  apiFiles: [],
  namespaces: [],
};

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
};

/** Run a cell to the end; `answer(request)` returns a value or a promise of one. */
async function runCell(pool, code, { answer, language = "javascript" } = {}) {
  const run = pool.run({
    code,
    language,
    surface,
    limits,
    deadlineAt: Date.now() + 30_000,
    onRequest(request) {
      Promise.resolve(answer(request)).then((value) => run.settle(request.requestId, { ok: true, value }));
    },
  });
  for (let round = 0; round < 100_000; round++) {
    const event = await run.next();
    if (event.type === "completed") return event.value;
    if (event.type === "failed") throw new Error(`${event.code}: ${event.message}`);
  }
  throw new Error("too many rounds");
}

const results = [];
function record(name, value, unit, target, better = "lower") {
  const ok = better === "lower" ? value <= target : value >= target;
  results.push({ name, value: Number(value.toFixed(3)), unit, target, ok });
}

// 1. First result in a new process, from Node's start.
const firstRuns = [];
for (let index = 0; index < 5; index++) {
  const out = execFileSync(
    process.execPath,
    [fileURLToPath(new URL("./first-result.mjs", import.meta.url))],
    { encoding: "utf8" },
  );
  firstRuns.push(JSON.parse(out.trim()).firstResultMs);
}
record("first result in a new process (median of 5)", median(firstRuns), "ms", 60);

const pool = createSandboxPool();
await runCell(pool, "return 0");

// 2. TypeScript: the first cell pays for loading the transformer, later ones do not.
{
  const js = [];
  for (let index = 0; index < 20; index++) {
    const started = performance.now();
    await runCell(pool, "const n = 20; return n + 1");
    js.push(performance.now() - started);
  }
  const started = performance.now();
  await runCell(pool, "const n: number = 20; return n + 1", { language: "typescript" });
  const firstTs = performance.now() - started;
  const ts = [];
  for (let index = 0; index < 20; index++) {
    const begin = performance.now();
    await runCell(pool, `const n: number = ${index}; interface P { a: string } return n + 1`, {
      language: "typescript",
    });
    ts.push(performance.now() - begin);
  }
  record("TypeScript first cell overhead", firstTs - median(js), "ms", 60);
  record("TypeScript later cell overhead (median)", Math.max(0, median(ts) - median(js)), "ms", 1);
}

// 3. Warm trivial cell, end to end through the pool.
{
  const times = [];
  for (let index = 0; index < 300; index++) {
    const started = performance.now();
    await runCell(pool, "return 1+1");
    times.push(performance.now() - started);
  }
  record("warm trivial cell p50", percentile(times, 0.5), "ms", 1.5);
  record("warm trivial cell p95 (info)", percentile(times, 0.95), "ms", Number.POSITIVE_INFINITY);
}

// 4. 100 sequential awaited host calls (the host answers at once).
{
  const times = [];
  for (let index = 0; index < 10; index++) {
    const started = performance.now();
    await runCell(
      pool,
      "let sum = 0; for (let i = 0; i < 100; i++) sum += await tools.call('core:host:list', { i }); return sum",
      {
        answer: () => 1,
      },
    );
    times.push(performance.now() - started);
  }
  record("100 sequential awaited host calls (median run)", median(times), "ms", 5);
}

// 5. 16 parallel host calls that each take 50 ms.
{
  const times = [];
  for (let index = 0; index < 5; index++) {
    const started = performance.now();
    await runCell(
      pool,
      "const all = []; for (let i = 0; i < 16; i++) all.push(tools.list({ i })); return (await Promise.all(all)).length",
      {
        answer: () => new Promise((resolve) => setTimeout(() => resolve("done"), 50)),
      },
    );
    times.push(performance.now() - started);
  }
  record("16 parallel 50 ms host calls (median run)", median(times), "ms", 60);
}

// 6. A host result of 10,000 small objects, filtered in the cell.
{
  const rows = Array.from({ length: 10_000 }, (_, index) => ({
    id: index,
    name: `item-${index}`,
    open: index % 3 === 0,
  }));
  const times = [];
  for (let index = 0; index < 10; index++) {
    const started = performance.now();
    const count = await runCell(
      pool,
      "const rows = await tools.list({}); return rows.filter((row) => row.open).length",
      {
        answer: () => rows,
      },
    );
    times.push(performance.now() - started);
    if (count !== 3334) throw new Error(`filtered ${count}`);
  }
  record("10,000-object host result filtered in the cell (median)", median(times), "ms", 8);
}

// 7. Suspend to snapshot, restore in another worker, finish.
{
  const times = [];
  const sizes = [];
  for (let index = 0; index < 10; index++) {
    const requests = [];
    const run = pool.run({
      code: "const v = await tools.call('core:host:list', {}); return v + 1",
      language: "javascript",
      surface,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest: (request) => requests.push(request),
    });
    await run.next();
    const started = performance.now();
    const suspended = await run.suspend();
    const restored = pool.restore({
      snapshot: suspended.snapshot,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest() {},
    });
    await restored.next();
    restored.settle(suspended.pending[0].requestId, { ok: true, value: 41 });
    const event = await restored.next();
    times.push(performance.now() - started);
    sizes.push(suspended.bytes);
    if (event.type !== "completed" || event.value !== 42) throw new Error(JSON.stringify(event));
  }
  record("suspend, restore in another worker, finish (median)", median(times), "ms", 10);
  record("compressed snapshot of a small heap", median(sizes) / 1024, "KB", 150);
}

// 8. Four concurrent clients running trivial cells.
{
  const durationMs = 2_000;
  let completed = 0;
  const deadline = performance.now() + durationMs;
  const client = async () => {
    while (performance.now() < deadline) {
      await runCell(pool, "return 1+1");
      completed++;
    }
  };
  const started = performance.now();
  await Promise.all([client(), client(), client(), client()]);
  record(
    "4 concurrent clients, trivial cells per second",
    completed / ((performance.now() - started) / 1000),
    "cells/s",
    1000,
    "higher",
  );
}

// 9. Host event-loop delay while a guest spins for a second.
{
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const run = pool.run({
    code: "while (true) {}",
    language: "javascript",
    surface,
    limits,
    deadlineAt: Date.now() + 1_000,
    onRequest() {},
  });
  const event = await run.next();
  histogram.disable();
  if (event.type !== "failed" || event.code !== "timeout") throw new Error(JSON.stringify(event));
  record("host event-loop delay p99 while a guest spins 1 s", histogram.percentile(99) / 1e6, "ms", 100);
  record(
    "host event-loop delay max while a guest spins 1 s (info)",
    histogram.max / 1e6,
    "ms",
    Number.POSITIVE_INFINITY,
  );
}

await pool.close();

const width = Math.max(...results.map((row) => row.name.length));
const load = loadavg()
  .map((value) => value.toFixed(2))
  .join(" ");
console.log(`sandbox bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${load}\n`);
console.log(`${"measure".padEnd(width)}  ${"value".padStart(10)}  unit     target   ok`);
for (const row of results) {
  const target = Number.isFinite(row.target) ? `${row.unit === "cells/s" ? ">=" : "<="} ${row.target}` : "-";
  console.log(
    `${row.name.padEnd(width)}  ${String(row.value).padStart(10)}  ${row.unit.padEnd(7)}  ${target.padEnd(8)} ${Number.isFinite(row.target) ? (row.ok ? "yes" : "NO") : ""}`,
  );
}
mkdirSync(new URL("../bench-results/", import.meta.url), { recursive: true });
writeFileSync(
  new URL("../bench-results/sandbox.json", import.meta.url),
  `${JSON.stringify({ node: process.version, cpus: availableParallelism(), loadAverage: loadavg(), date: new Date().toISOString(), results: results.map((row) => ({ ...row, target: Number.isFinite(row.target) ? row.target : null })) }, null, 2)}\n`,
);
