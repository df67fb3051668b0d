// Benchmarks of @codecell/snapshot-store against the built package (run `pnpm build` first; turbo's
// `bench` task does). Prints a table and writes bench-results/snapshot-store.json.
//
//   node bench/snapshot-store/snapshot-store.bench.mjs            all measurements
//   node --expose-gc bench/snapshot-store.bench.mjs rss <memory|sqlite>   one RSS measurement (internal)
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  MemorySnapshotBackend,
  openSnapshotStore,
  RedisSnapshotBackend,
  SqliteSnapshotBackend,
} from "@codecell/snapshot-store";
import { startRedisServer } from "../../scripts/redis-server.mjs";

const RECORD_BYTES = 150 * 1024;
const ROUNDS = 400;
const SWEEP_RECORDS = 10_000;
const RSS_RECORDS = 1_000;

const scope = {
  agentId: "agent-main",
  sessionKey: "agent:main:bench",
  sessionId: "session-bench",
  parentRunId: "agent-run-bench",
  toolCallId: "toolu_bench",
};

// Compressed snapshots look random, so random bytes are the honest stand-in.
const compressed = randomBytes(RECORD_BYTES);

function payload(snapshot) {
  return {
    scope,
    snapshot,
    pendingCalls: Array.from({ length: 4 }, (_, index) => ({
      callId: `call-${index}`,
      toolId: "mcp__github__search_issues",
      startedAt: new Date().toISOString(),
    })),
    output: [{ type: "text", text: "fetched 12 issues" }],
    telemetry: { execCount: 1, waitCount: 0, nested: { calls: 4 } },
  };
}

function percentile(sorted, fraction) {
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
}

function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50Us: round(percentile(sorted, 0.5) * 1000), p99Us: round(percentile(sorted, 0.99) * 1000) };
}

function round(value) {
  return Math.round(value * 10) / 10;
}

const temporary = mkdtempSync(join(tmpdir(), "codecell-snapshot-bench-"));
let files = 0;
/** A real redis-server on a free loopback port, for the Redis rows; null when it is not installed. */
let redis = null;
function backendOf(kind, options = {}) {
  if (kind === "memory") return new MemorySnapshotBackend();
  if (kind === "redis") {
    files += 1;
    return new RedisSnapshotBackend({
      url: redis.url,
      secret: "bench-secret-of-at-least-thirty-two-bytes",
      keyPrefix: `bench-${files}:`,
    });
  }
  files += 1;
  return new SqliteSnapshotBackend({ path: join(temporary, `bench-${files}.db`), ...options });
}

async function putGet(kind, options = {}) {
  const store = await openSnapshotStore({
    backend: backendOf(kind, options),
    maxLiveRuns: ROUNDS + 50,
    maxLiveRunsPerPrincipal: ROUNDS + 50,
    sweepIntervalMs: 0,
  });
  const put = [];
  const get = [];
  const runIds = [];
  for (let index = 0; index < ROUNDS + 20; index += 1) {
    const input = payload(compressed);
    const start = performance.now();
    const { runId } = await store.suspend(input);
    const elapsed = performance.now() - start;
    if (index >= 20) put.push(elapsed);
    runIds.push(runId);
  }
  for (const [index, runId] of runIds.entries()) {
    const start = performance.now();
    const claim = await store.claim(runId, scope);
    const elapsed = performance.now() - start;
    if (claim.snapshot.byteLength !== RECORD_BYTES) throw new Error("bench read back the wrong record");
    if (index >= 20) get.push(elapsed);
    await store.finish(claim, "completed");
  }
  await store.close();
  return { put: summary(put), get: summary(get) };
}

async function sweep(kind) {
  let now = Date.UTC(2026, 0, 1);
  const store = await openSnapshotStore({
    backend: backendOf(kind),
    maxLiveRuns: SWEEP_RECORDS,
    maxLiveRunsPerPrincipal: SWEEP_RECORDS,
    sweepIntervalMs: 0,
    clock: () => now,
  });
  const small = randomBytes(1024);
  for (let index = 0; index < SWEEP_RECORDS; index += 1)
    await store.suspend({ ...payload(small), ttlSeconds: 60 });
  now += 61_000;
  // A 1 ms ticker: the longest gap between its ticks is the longest the sweep held the event loop.
  let last = performance.now();
  let longestGap = 0;
  const ticker = setInterval(() => {
    const tick = performance.now();
    longestGap = Math.max(longestGap, tick - last);
    last = tick;
  }, 1);
  await new Promise((resolve) => setTimeout(resolve, 10));
  const start = performance.now();
  const report = await store.sweep();
  const ms = performance.now() - start;
  // One more turn of the loop so a stall at the very end of the sweep is counted too.
  await new Promise((resolve) => setTimeout(resolve, 10));
  clearInterval(ticker);
  if (report.expired !== SWEEP_RECORDS) {
    throw new Error(`sweep expired ${report.expired}, expected ${SWEEP_RECORDS}`);
  }
  await store.close();
  return { totalMs: round(ms), longestStallMs: round(longestGap) };
}

/**
 * Runs in a fresh child process so earlier measurements do not pollute the heap. Reports the RSS growth
 * over the first 1,000 live records (fixed costs included) and over the next 1,000 (the marginal cost).
 */
async function rssChild(kind) {
  const store = await openSnapshotStore({
    backend: backendOf(kind),
    maxLiveRuns: 2 * RSS_RECORDS,
    maxLiveRunsPerPrincipal: 2 * RSS_RECORDS,
    sweepIntervalMs: 0,
  });
  const measure = () => {
    globalThis.gc?.();
    return process.memoryUsage().rss;
  };
  const fill = async (count) => {
    for (let index = 0; index < count; index += 1) {
      // Distinct content per record from one source buffer: the store copies or writes what it keeps,
      // so the growth measured is the store's, not the bench's garbage.
      compressed.writeUInt32LE(index, 0);
      await store.suspend(payload(compressed));
    }
  };
  await fill(1);
  const start = measure();
  await fill(RSS_RECORDS - 1);
  const first = measure();
  await fill(RSS_RECORDS);
  const second = measure();
  await store.close();
  const mib = (bytes) => round(bytes / 2 ** 20);
  process.stdout.write(
    JSON.stringify({ first1000MiB: mib(first - start), next1000MiB: mib(second - first) }),
  );
}

async function main() {
  const self = fileURLToPath(import.meta.url);
  try {
    redis = await startRedisServer();
  } catch (error) {
    console.warn(`Redis rows skipped: ${error.message}`);
  }
  const results = {
    recordBytes: RECORD_BYTES,
    rounds: ROUNDS,
    node: process.version,
    putGet: {
      memory: await putGet("memory"),
      sqlite: await putGet("sqlite"),
      "sqlite (synchronous=full)": await putGet("sqlite", { synchronous: "full" }),
    },
    sweep10000: { memory: await sweep("memory"), sqlite: await sweep("sqlite") },
    rssPer1000Live: {},
  };
  if (redis !== null) {
    // Loopback TCP to a redis-server on the same 2 cores: a lower bound for a network hop.
    results.putGet["redis (loopback)"] = await putGet("redis");
    results.sweep10000.redis = await sweep("redis");
    await redis.stop();
  }
  for (const kind of ["memory", "sqlite"]) {
    const output = execFileSync(process.execPath, ["--expose-gc", self, "rss", kind], { encoding: "utf8" });
    results.rssPer1000Live[kind] = JSON.parse(output);
  }

  const rows = [];
  for (const [backend, figures] of Object.entries(results.putGet)) {
    rows.push({ measure: "put 150 KB (µs)", backend, p50: figures.put.p50Us, p99: figures.put.p99Us });
    rows.push({ measure: "get 150 KB (µs)", backend, p50: figures.get.p50Us, p99: figures.get.p99Us });
  }
  for (const [backend, sweepFigures] of Object.entries(results.sweep10000)) {
    rows.push({ measure: "sweep 10,000 expired: total (ms)", backend, p50: sweepFigures.totalMs, p99: "" });
    rows.push({
      measure: "sweep 10,000 expired: longest stall (ms)",
      backend,
      p50: sweepFigures.longestStallMs,
      p99: "",
    });
  }
  for (const [backend, rss] of Object.entries(results.rssPer1000Live)) {
    rows.push({
      measure: "RSS, first 1,000 live 150 KB records (MiB)",
      backend,
      p50: rss.first1000MiB,
      p99: "",
    });
    rows.push({
      measure: "RSS, next 1,000 live 150 KB records (MiB)",
      backend,
      p50: rss.next1000MiB,
      p99: "",
    });
  }
  console.table(rows);
  const outDirectory = join(dirname(self), "..", "bench-results");
  mkdirSync(outDirectory, { recursive: true });
  writeFileSync(join(outDirectory, "snapshot-store.json"), `${JSON.stringify(results, null, 2)}\n`);
}

try {
  if (process.argv[2] === "rss") await rssChild(process.argv[3]);
  else await main();
} finally {
  rmSync(temporary, { recursive: true, force: true });
}
