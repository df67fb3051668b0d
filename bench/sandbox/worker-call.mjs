// The sandbox worker's whole part of one nested call, in one thread: `node bench/sandbox/worker-call.mjs` after a
// build. Loads the built dist/worker/sandbox-worker.js in this thread with a stand-in for its port (a
// loader hook answers its `node:worker_threads` import), starts a cell of sequential
// `await tools.inc(...)` and answers every idle report with a settle at once. What it measures is the
// worker's own work per call (message validation, the bridge, quickjs-wasi, the prelude and QuickJS)
// without the thread hop, on a warm thread: this thread's CPU µs per call (schedstat), which load
// distorts far less than the two-thread benches. What the worker posts is always cloned (as its port
// would); WORKER_CALL_CLONE=1 also clones what this thread sends it and the copies it reads back.
// WORKER_CALL_DIST points at another build's dist; WORKER_CALL_CALLS and WORKER_CALL_REPS set the cell's
// calls and the measured runs (median printed).
import { readFileSync } from "node:fs";
import { createRequire, register } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const dist =
  process.env.WORKER_CALL_DIST ?? fileURLToPath(new URL("../../packages/sandbox/dist", import.meta.url));
const CALLS = Number(process.env.WORKER_CALL_CALLS ?? 20_000);
const REPS = Number(process.env.WORKER_CALL_REPS ?? 7);
const clone = process.env.WORKER_CALL_CLONE === "1" ? structuredClone : (message) => message;

// The stand-in port: what the worker posts is kept in `sent`, copied as a real port copies it (the worker
// reuses its outbox array once a post returns); `listen` is its message listener.
const channel = { listen: null, sent: [] };
globalThis.__workerCallChannel = channel;
const standIn = `
  const channel = globalThis.__workerCallChannel;
  export const parentPort = {
    on(event, listener) { if (event === "message") channel.listen = listener; return this; },
    postMessage(message) { channel.sent.push(structuredClone(message)); },
  };
  export function receiveMessageOnPort() { return undefined; }
  export const isMainThread = false;`;
// Every module of the worker (dist/worker/) gets the stand-in.
const workerDir = pathToFileURL(`${dist}/worker/`).href;
const hook = `
  export async function resolve(specifier, context, next) {
    if (specifier === "node:worker_threads" && context.parentURL?.startsWith(${JSON.stringify(workerDir)})) {
      return { url: ${JSON.stringify(`data:text/javascript,${encodeURIComponent(standIn)}`)}, shortCircuit: true };
    }
    return next(specifier, context);
  }`;
register(`data:text/javascript,${encodeURIComponent(hook)}`);
await import(pathToFileURL(`${dist}/worker/sandbox-worker.js`).href);

const send = (message) => channel.listen(clone(message));
async function received() {
  while (channel.sent.length === 0) await new Promise((resolve) => setImmediate(resolve));
  return clone(channel.sent.shift());
}
const threadNanos = () => Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);

const wasmPath = createRequire(`${dist}/index.js`).resolve("quickjs-wasi/quickjs.wasm");
send({ type: "init", module: new WebAssembly.Module(readFileSync(wasmPath)), snapshotSecret: null });
const ready = await received();
if (ready.type !== "ready") throw new Error(`init: ${JSON.stringify(ready)}`);

const surface = JSON.stringify({
  allTools: [{ id: "core:bench:inc", name: "inc", description: "Add one", source: "core" }],
  toolFunctions: [{ name: "inc", toolId: "core:bench:inc" }],
  mcpServers: [],
  apiFiles: [],
  namespaces: [],
});
const limits = {
  memoryLimitBytes: 64 << 20,
  maxOutputBytes: 1 << 20,
  maxPendingToolCalls: 16,
  maxSnapshotBytes: 10 << 20,
};

let runs = 0;
async function runCell() {
  const runId = `bench-${++runs}`;
  const deadlineAt = Date.now() + 600_000;
  send({
    type: "start",
    runId,
    code: `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await tools.inc({ value: 1 }); return s;`,
    language: "javascript",
    surface,
    limits,
    deadlineAt,
    signal: new Int32Array(new SharedArrayBuffer(4)),
  });
  let message = await received();
  const started = threadNanos();
  let calls = 0;
  // Requests of a drain that ran past the outbox hold arrive in their own messages before the idle.
  let held = [];
  for (;;) {
    if (message.type === "idle") {
      const requests = [...held, ...(message.requests ?? [])];
      held = [];
      const items = requests.map((request) => ({
        requestId: request.requestId,
        ok: true,
        json: String(request.input.value),
      }));
      calls += items.length;
      send({ type: "settle", runId, items, deadlineAt });
    } else if (message.type === "request") {
      held.push(message.request);
    } else if (message.type === "completed") {
      if (message.value !== CALLS) throw new Error(`wrong result ${JSON.stringify(message.value)}`);
      break;
    } else if (message.type !== "started") {
      throw new Error(`unexpected ${JSON.stringify(message).slice(0, 300)}`);
    }
    message = channel.sent.length > 0 ? clone(channel.sent.shift()) : await received();
  }
  return (threadNanos() - started) / 1000 / calls;
}

await runCell();
const samples = [];
for (let index = 0; index < REPS; index++) samples.push(await runCell());
samples.sort((a, b) => a - b);
const median = samples[Math.floor(samples.length / 2)];
console.log(
  `worker's part of a nested call, one thread (${REPS} x ${CALLS} calls${clone === structuredClone ? ", messages cloned" : ""}): median ${median.toFixed(2)} µs CPU per call (min ${samples[0].toFixed(2)})`,
);
process.exit(0);
