import { createSandboxPool } from "@codecell/sandbox";
const t0 = performance.now();
const pool = createSandboxPool({ thread: process.argv[2] ?? "in-thread" });
const limits = { memoryLimitBytes: 64 << 20, maxOutputBytes: 65536, maxPendingToolCalls: 16, maxSnapshotBytes: 10 << 20 };
const surface = { allTools: [], toolFunctions: [], mcpServers: [], apiFiles: [], namespaces: [] };
async function go(code, onRequest) {
  const run = pool.run({ code, language: "javascript", surface, limits, timeoutMs: 1000, onRequest: (r) => onRequest?.(run, r) });
  for (;;) { const e = await run.next(); if (e.type !== "idle") return e; }
}
console.log(await go("return 1"), performance.now() - t0);
console.log(await go("while(true){}"));
console.log(await go("const a=[]; for(;;) a.push('x'.repeat(1000))"));
console.log(await go("return typeof process + typeof require + typeof globalThis.fetch"));
console.log(await go("text('hi'); const r = await yield_control(); return 2"), "yield");
console.log(pool.stats());
await pool.close();
