// Many clients at once (a regression guard for the "adversarial load" figures, 20 HTTP
// clients): the built CLI serves Streamable HTTP on 127.0.0.1, and 20 MCP client sessions (the SDK's
// client, all in this process) each run their cells back to back, all at once.
// Throughput is all cells over the time from the first start to the last end; latency is each cell's
// own round trip; the gateway's RSS is sampled every 50 ms. Run `pnpm --filter @codecell/bench bench:gateway`
// (it builds first through turbo). Prints a table and writes bench-results/load.json.
// BENCH_CLI runs it against another build's dist/cli.js (to compare builds in one sitting);
// BENCH_LOAD_CLIENTS (default 20) and BENCH_LOAD_CELLS (cells per client and phase, default 50) bound it.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  BENCH_CELLS,
  benchDir,
  benchWorkspace,
  cli,
  mcpSession,
  memoryServer,
  percentile,
  rssOf,
  startHttpGateway,
} from "./http-gateway.mjs";

const CLIENTS = Number(process.env.BENCH_LOAD_CLIENTS ?? 20);
const CELLS_PER_CLIENT = Number(process.env.BENCH_LOAD_CELLS ?? 50);
/** Unmeasured cells each client runs first (its session's first exec, the MCP server's first calls). */
const WARMUP = 3;
const { configPath } = benchWorkspace("codecell-load-bench-", (dir) => ({
  tools: { codeMode: { enabled: true, timeoutMs: 60_000 } },
  mcpServers: { memory: memoryServer(dir) },
}));

/** CPU time process `pid` has used, all threads, in ms (/proc/<pid>/stat: utime + stime, in ticks). */
function cpuMsOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
}
const CLOCK_TICKS_PER_SECOND = 100;

function cpuMsOfSelf() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Every client runs `count` cells of `code` back to back, all clients at once. */
async function loadPhase(sessions, code, count) {
  const times = [];
  let failed = 0;
  let firstFailure = null;
  const started = performance.now();
  await Promise.all(
    sessions.map(async (session) => {
      for (let index = 0; index < count; index++) {
        const cellStarted = performance.now();
        const result = await session.exec(code);
        times.push(performance.now() - cellStarted);
        if (result.status !== "completed") {
          failed += 1;
          firstFailure ??= result;
        }
      }
    }),
  );
  const elapsed = performance.now() - started;
  times.sort((a, b) => a - b);
  return {
    cells: times.length,
    cellsPerSecond: (times.length / elapsed) * 1000,
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    max: times.at(-1),
    failed,
    firstFailure,
  };
}

const { child, url } = await startHttpGateway(configPath);
const rows = [];
try {
  const sessions = await Promise.all(
    Array.from({ length: CLIENTS }, (_, index) => mcpSession(url, `load-${index}`)),
  );
  for (const [cell, code] of Object.entries(BENCH_CELLS)) {
    await loadPhase(sessions, code, WARMUP);
    let peakRss = rssOf(child.pid) ?? 0;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, rssOf(child.pid) ?? 0);
    }, 50);
    const cpuBefore = { gateway: cpuMsOf(child.pid), clients: cpuMsOfSelf() };
    const phase = await loadPhase(sessions, code, CELLS_PER_CLIENT);
    clearInterval(sampler);
    const gatewayCpuMsPerCell = (cpuMsOf(child.pid) - cpuBefore.gateway) / phase.cells;
    const clientsCpuMsPerCell = (cpuMsOfSelf() - cpuBefore.clients) / phase.cells;
    rows.push({
      cell,
      clients: CLIENTS,
      ...phase,
      gatewayCpuMsPerCell,
      clientsCpuMsPerCell,
      peakRss,
    });
  }
  await Promise.all(sessions.map((session) => session.close()));
} finally {
  child.kill("SIGTERM");
}

const ms = (value) => `${value.toFixed(1)} ms`;
console.log(
  `${CLIENTS} MCP clients over HTTP at once against ${cli}, ${CELLS_PER_CLIENT} cells each per phase after ${WARMUP} warm-up (Node ${process.versions.node}, ${availableParallelism()} CPUs)`,
);
console.log(
  "| cell | cells/s | p50 | p99 | max | failed | gateway CPU ms/cell | clients' CPU ms/cell | gateway peak RSS |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const row of rows)
  console.log(
    `| ${row.cell} | ${row.cellsPerSecond.toFixed(0)} | ${ms(row.p50)} | ${ms(row.p99)} | ${ms(row.max)} | ${row.failed} | ${row.gatewayCpuMsPerCell.toFixed(2)} | ${row.clientsCpuMsPerCell.toFixed(2)} | ${(row.peakRss / 1024 / 1024).toFixed(0)} MiB |`,
  );
for (const row of rows)
  if (row.firstFailure)
    console.error(`${row.cell}: a cell failed: ${JSON.stringify(row.firstFailure).slice(0, 300)}`);
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "load.json"),
  `${JSON.stringify({ node: process.versions.node, cpus: availableParallelism(), rows }, null, 2)}\n`,
);
if (rows.some((row) => row.failed > 0)) process.exitCode = 1;
