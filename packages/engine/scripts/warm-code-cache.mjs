// Run by scripts/bundle-engine.mjs in a fresh `node` (no flags, as an embedding host runs): imports the
// bundle just built, runs the cells a host's first minutes run (on worker threads and on this thread; a
// plain result, a nested tool call, a failure), and writes V8's code cache of the engine's script
// with everything those compiled. A cache written right after the compile would hold only the top-level
// code, and every function of the first cell would still be compiled on its way.
import { writeFileSync } from "node:fs";

/** The entry hands its script over through this hook (dist/bundle/index.js). */
const HOOK = Symbol.for("codecell.engineCodeCache");
let handed = null;
globalThis[HOOK] = (script, file) => {
  handed = { script, file };
};

const { createCodeModeEngine } = await import("../dist/bundle/index.js");
if (handed === null) throw new Error("dist/bundle/index.js did not hand over its script");

const tools = [
  {
    name: "inc",
    description: "Adds one.",
    parameters: { type: "object", properties: { value: { type: "number" } } },
    source: "plugin",
    owner: "warm",
  },
];
const cells = [
  "return 1 + 1",
  "const a = await tools.inc({ value: 1 }); return a + 1",
  "throw new Error('expected')",
];
for (const sandbox of [undefined, { thread: "in-thread" }]) {
  const engine = createCodeModeEngine({
    config: { enabled: true, timeoutMs: 60_000 },
    ...(sandbox ? { sandbox } : {}),
  });
  const run = engine.prepareRun({
    tools,
    context: { agentId: "warm", sessionKey: "warm", sessionId: "warm", runId: "warm" },
    executor: { callTool: (call) => call.input.value + 1 },
  });
  let callId = 0;
  for (const code of cells) {
    const result = await run.exec({ code }, { toolCallId: `c${++callId}` });
    if (result.status !== "completed" && result.status !== "failed")
      throw new Error(`warm-up cell ${JSON.stringify(code)}: ${JSON.stringify(result)}`);
  }
  await engine.close();
}

const data = handed.script.createCachedData();
writeFileSync(handed.file, data);
process.stdout.write(`code cache ${data.length} bytes\n`);
