// What one hostile client costs everyone else: the built CLI serves Streamable HTTP on
// 127.0.0.1; a polite client session times `return 1` quietly, then while a hostile session keeps
// spinning cells running; then the gateway's RSS is sampled over a hostile batch (deep values, huge
// strings, spinning loops, big outputs). Run `pnpm --filter @codecell/bench bench:gateway` (it builds first
// through turbo). Prints a table and writes bench-results/hostile.json. BENCH_ITERATIONS sets the
// polite cells per phase (default 200); BENCH_HOSTILE_ROUNDS the rounds of the hostile batch (default 3).
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  benchDir,
  benchWorkspace,
  percentile,
  rssOf,
  mcpSession as session,
  startHttpGateway,
} from "./http-gateway.mjs";

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const HOSTILE_ROUNDS = Number(process.env.BENCH_HOSTILE_ROUNDS ?? 3);
const WARMUP = 10;
/** Spinning cells the hostile session keeps running at once: as many as the pool has base workers. */
const SPINNERS = availableParallelism();
const CELL_TIMEOUT_MS = 3_000;

const { configPath } = benchWorkspace("codecell-hostile-bench-", {
  tools: { codeMode: { enabled: true, timeoutMs: CELL_TIMEOUT_MS } },
  mcpServers: {},
});

/** The hostile batch: each cell is one class the sandbox must contain without hurting the host. */
const HOSTILE = {
  "deep value (2,000 levels)": "let o = {}; for (let i = 0; i < 2000; i++) o = { o }; return o;",
  "deep tool input (2,000 levels)":
    "let o = {}; for (let i = 0; i < 2000; i++) o = { o }; return await tools.call('x', o);",
  "huge string (2**30)": "return 'x'.repeat(2 ** 30).length;",
  "join past the string limit": "return new Array(2 ** 32 - 1).join().length;",
  "memory bomb": "const a = []; for (;;) a.push({ i: a.length, s: 'x' + a.length });",
  "spinning loop": "while (true) {}",
  "big output": "for (;;) text('y'.repeat(4096));",
  "big return value": "return 'z'.repeat(8 * 1024 * 1024);",
  "many tool calls":
    "const all = []; for (let i = 0; i < 5000; i++) all.push(tools.call('x', { i }).catch((e) => e.code)); return (await Promise.all(all)).length;",
};

async function politeLatency(polite, iterations) {
  const times = [];
  let failed = 0;
  for (let index = 0; index < WARMUP + iterations; index++) {
    const started = performance.now();
    const result = await polite.exec("return 1");
    const elapsed = performance.now() - started;
    if (result.status !== "completed") {
      failed += 1;
      if (failed === 1) console.error(`polite cell failed: ${JSON.stringify(result).slice(0, 300)}`);
    }
    if (index >= WARMUP) times.push(elapsed);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), max: times.at(-1), failed };
}

const { child, url } = await startHttpGateway(configPath);
const rows = [];
let rss = null;
try {
  const polite = await session(url, "polite");
  const hostile = await session(url, "hostile");

  rows.push({ phase: "quiet", spinners: 0, ...(await politeLatency(polite, ITERATIONS)) });

  // Keep SPINNERS spinning cells running for the whole phase: each one that times out is replaced.
  let spinning = true;
  let spinnerCells = 0;
  const spinner = async () => {
    while (spinning) {
      spinnerCells += 1;
      await hostile.exec("while (true) {}");
    }
  };
  const spinners = Array.from({ length: SPINNERS }, spinner);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const underAttack = await politeLatency(polite, ITERATIONS);
  spinning = false;
  await Promise.all(spinners);
  rows.push({ phase: "while spinning", spinners: SPINNERS, spinnerCells, ...underAttack });

  // RSS over the hostile batch, sampled every 50 ms; all of a round's cells run at once.
  const before = rssOf(child.pid);
  let peak = before ?? 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssOf(child.pid) ?? 0);
  }, 50);
  const outcomes = {};
  const batchStarted = performance.now();
  for (let round = 0; round < HOSTILE_ROUNDS; round++) {
    const results = await Promise.all(Object.values(HOSTILE).map((code) => hostile.exec(code)));
    Object.keys(HOSTILE).forEach((name, index) => {
      const result = results[index];
      outcomes[name] =
        result.status === "completed" ? "completed" : `${result.status} ${result.code ?? ""}`.trim();
    });
  }
  const batchMs = performance.now() - batchStarted;
  clearInterval(sampler);
  const afterBatch = rssOf(child.pid);
  // Still serving after the batch.
  const alive = (await polite.exec("return 1")).status === "completed";
  rss = { before, peak, after: afterBatch, rounds: HOSTILE_ROUNDS, batchMs, outcomes, alive };

  await polite.close();
  await hostile.close();
} finally {
  child.kill("SIGTERM");
}

const fmt = (ms) => `${ms.toFixed(1)} ms`;
const mib = (bytes) => (bytes === null ? "n/a" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);
console.log(
  `another session's \`return 1\` over MCP (HTTP), ${ITERATIONS} cells per phase after ${WARMUP} warm-up; hostile cells time out at ${CELL_TIMEOUT_MS} ms (Node ${process.versions.node}, ${availableParallelism()} CPUs)`,
);
console.log("| phase | hostile spinners | p50 | p99 | max | polite failures |");
console.log("| --- | --- | --- | --- | --- | --- |");
for (const row of rows)
  console.log(
    `| ${row.phase} | ${row.spinners} | ${fmt(row.p50)} | ${fmt(row.p99)} | ${fmt(row.max)} | ${row.failed} |`,
  );
console.log("");
console.log(
  `gateway RSS over ${rss.rounds} rounds of the hostile batch (${(rss.batchMs / 1000).toFixed(1)} s; every cell of a round at once)`,
);
console.log("| before | peak | after | still serving |");
console.log("| --- | --- | --- | --- |");
console.log(`| ${mib(rss.before)} | ${mib(rss.peak)} | ${mib(rss.after)} | ${rss.alive ? "yes" : "NO"} |`);
console.log("");
console.log("| hostile cell | outcome |");
console.log("| --- | --- |");
for (const [name, outcome] of Object.entries(rss.outcomes)) console.log(`| ${name} | ${outcome} |`);
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "hostile.json"),
  `${JSON.stringify({ node: process.versions.node, cpus: availableParallelism(), latency: rows, rss }, null, 2)}\n`,
);
if (!rss.alive || rows.some((row) => row.failed > 0)) process.exitCode = 1;
