// Run by scripts/bundle-worker.mjs in a fresh `node` (no flags, as an embedding host runs): makes an
// in-thread pool from the build just made, runs the cells a host's first minutes run (a plain result, a
// host call answered, a failure, a suspension and its restore), and writes V8's code cache of the
// in-thread bundle's script with everything those compiled. A cache written right after the compile
// would hold only the top-level code, and every function of the first cell would still be compiled.
import { writeFileSync } from "node:fs";

/** src/in-thread-sandbox.ts hands its script over through this hook. */
let handed = null;
globalThis[Symbol.for("codecell.inThreadCodeCache")] = (script, file) => {
  handed = { script, file };
};

const { createSandboxPool } = await import("../dist/index.js");
const surface = {
  allTools: [
    { id: "plugin:warm:inc", name: "inc", description: "Adds one.", source: "plugin", sourceName: "warm" },
  ],
  toolFunctions: [{ name: "inc", toolId: "plugin:warm:inc" }],
  mcpServers: [],
  apiFiles: [],
  namespaces: [],
};
const limits = {
  memoryLimitBytes: 64 * 1024 * 1024,
  maxOutputBytes: 64 * 1024,
  maxPendingToolCalls: 16,
  maxSnapshotBytes: 10 * 1024 * 1024,
};
const pool = createSandboxPool({ thread: "in-thread", size: 1 });
const cells = [
  "return 1 + 1",
  "const a = await tools.inc({ value: 1 }); return a + 1",
  "throw new Error('expected')",
];
for (const code of cells) {
  const run = pool.run({
    code,
    language: "javascript",
    surface,
    limits,
    timeoutMs: 60_000,
    onRequest: () => {},
  });
  for (let round = 0; round < 100; round++) {
    const event = await run.next();
    if (event.type !== "idle") break;
    for (const request of event.pending) run.settle(request.requestId, { ok: true, value: 1 });
  }
}
await pool.close();
if (handed === null) throw new Error("the in-thread sandbox did not hand over its script");
const data = handed.script.createCachedData();
writeFileSync(handed.file, data);
process.stdout.write(`code cache ${data.length} bytes\n`);
