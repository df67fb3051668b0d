// @ts-check
// The checker's thread: it holds TypeScript and the warm language services, so a check (the first one
// loads the compiler, hundreds of milliseconds) never blocks the host's event loop.
import { parentPort } from "node:worker_threads";
import { createCheckerCore } from "./checker-core.js";

/** @type {ReturnType<typeof createCheckerCore> | undefined} */
let core;
// Checks run one at a time, in the order they came.
let queue = Promise.resolve();

parentPort?.on(
  "message",
  (
    /** @type {{ id: number; warm?: true; prepare?: true } & import("./checker-core.js").CheckRequest} */ message,
  ) => {
    queue = queue.then(async () => {
      try {
        if (!core) {
          core = createCheckerCore();
          // The compiler is loaded: from now on a check that runs over is a check that runs away (or one
          // queued behind it), never a slow load, and the host may stop the thread for it.
          parentPort?.postMessage({ loaded: true });
        }
        if (message.warm) {
          await core.warm();
          parentPort?.postMessage({ id: message.id, warmed: true });
          return;
        }
        if (message.prepare) {
          core.prepare(message);
          parentPort?.postMessage({ id: message.id, warmed: true });
          return;
        }
        const startedAt = performance.now();
        const outcome = await core.check(message);
        parentPort?.postMessage({ id: message.id, outcome, durationMs: performance.now() - startedAt });
      } catch (error) {
        // The reason travels to the model in a refused cell's error: the message, not the stack.
        const reason = String(error instanceof Error ? error.message : error).slice(0, 300);
        parentPort?.postMessage({ id: message.id, error: `the checker failed: ${reason}` });
      }
    });
  },
);
