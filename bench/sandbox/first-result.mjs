// Spawned by sandbox.bench.mjs in a fresh process: prints ms from process start to the first result.
import { createSandboxPool } from "@codecell/sandbox";

const limits = {
  memoryLimitBytes: 64 << 20,
  maxOutputBytes: 65_536,
  maxPendingToolCalls: 16,
  maxSnapshotBytes: 10 << 20,
};
const surface = { allTools: [], toolFunctions: [], mcpServers: [], apiFiles: [], namespaces: [] };
const pool = createSandboxPool({ size: Number(process.env.POOL_SIZE ?? 2) });
const run = pool.run({
  code: "return 1 + 1",
  language: "javascript",
  surface,
  limits,
  deadlineAt: Date.now() + 10_000,
  onRequest() {},
});
const event = await run.next();
const elapsed = performance.now();
if (event.type !== "completed" || event.value !== 2) throw new Error(JSON.stringify(event));
process.stdout.write(`${JSON.stringify({ firstResultMs: elapsed })}\n`);
await pool.close();
