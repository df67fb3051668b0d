// @ts-check
// JavaScript (checked by tsc through @ts-check) rather than TypeScript: scripts/bundle-worker.mjs bundles
// the worker from these sources as they are, and the tests start this file itself as a worker thread.
//
// The worker thread's entry: it holds the message shapes the answer path is optimized for, and hands
// the host's messages to the serve loop. What the worker does is in the modules beside it: the message
// routing (host-messages.js) and set-up (worker-init.js), the serve loop (serve-loop.js), the VMs
// (vm-pool.js), a run's life (guest-run.js), the guest's host calls (host-calls.js), what it sends the
// host (outbox.js), snapshots (run-snapshot.js) and its state shared between them (worker-state.js).
import { parentPort, receiveMessageOnPort } from "node:worker_threads";
import { dispatch } from "./serve-loop.js";
import { useWorkerPort } from "./worker-state.js";

/**
 * The messages of a quick call, kept for the worker's life in the shapes they arrive in: a settle parsed
 * from JSON (the shared channel) and one structured-cloned (the port), which give its items different
 * hidden classes (maps), and a tool call's request body as the guest's JSON makes it and onRequest gives
 * it its id. V8 frees the map of a shape that has no object left at a full garbage collection, and
 * drops the optimized code that checks for it. These objects are handled and let go within a call, so
 * at a collection none is usually alive, and without these the worker's first full collection would
 * throw away the optimized code of its answer path (serveWaitingRuns, the message checks, onRequest) in
 * the middle of a loop of calls. Held on the global under a symbol of its own, so neither the bundler
 * nor V8 drops them as unused; guest code never sees this global. This block stays in the entry: an
 * entry's statements are always kept, and it runs before the first message.
 */
{
  const settle = {
    type: "settle",
    runId: "",
    items: [{ requestId: "", ok: true, json: "", shallow: false }],
    deadlineAt: 0.5,
  };
  const callBody = JSON.parse('{"kind":"call","target":"","input":{}}');
  callBody.requestId = "";
  Object.defineProperty(globalThis, Symbol("codecell.messageShapes"), {
    value: [JSON.parse(JSON.stringify(settle)), structuredClone(settle), callBody],
  });
}

if (parentPort === null) throw new Error("sandbox-worker.js must run as a worker thread");
const port = parentPort;
useWorkerPort(port, receiveMessageOnPort);
port.on("message", dispatch);
// A host message this thread cannot read leaves a run waiting for a command that never comes: exit, so
// the host's exit handler fails this worker's runs at once and replaces it.
port.on("messageerror", (error) => {
  setImmediate(() => {
    throw error;
  });
});
