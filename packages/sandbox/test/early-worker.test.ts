import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type HostRequest, loadQuickJsModule } from "../src/index.js";
import { earlyWorkerWaiting } from "../src/worker-start.js";
import { limits, surface } from "./helpers.js";

/**
 * The sandbox package starts one worker as it loads (and sends it the module once compiled, with no
 * snapshot secret) so the first cell does not wait for a thread to boot. The first pool takes it and
 * sends its own init: the worker must then sign with that pool's secret, not the early null.
 */

const waitingBeforeAnyPool = earlyWorkerWaiting();
// Once the module is compiled the early worker has been sent it (with no secret): the pool's own init
// with its secret then comes second, the order a host that creates its engine late sees.
await loadQuickJsModule();
// The first pool of this file, with a secret: it takes the early worker.
const signed = createSandboxPool({ size: 1, snapshotSecret: "secret-early" });
const waitingAfterFirstPool = earlyWorkerWaiting();
const sameSecret = createSandboxPool({ size: 1, snapshotSecret: "secret-early" });
const unsigned = createSandboxPool({ size: 1 });
afterAll(() => Promise.all([signed.close(), sameSecret.close(), unsigned.close()]));

describe("the worker started as the package loads", () => {
  it("is taken by the first pool", () => {
    expect(waitingBeforeAnyPool).toBe(true);
    expect(waitingAfterFirstPool).toBe(false);
  });

  it("signs snapshots with the secret of the pool that took it", async () => {
    const requests: HostRequest[] = [];
    const run = signed.run({
      code: "const value = await tools.call('core:host:read_file', { path: 'a' }); return value;",
      language: "javascript",
      surface,
      limits,
      timeoutMs: 30_000,
      onRequest: (request) => requests.push(request),
    });
    expect(await run.next()).toMatchObject({ type: "idle" });
    const { snapshot } = await run.suspend();

    const forged = unsigned.restore({ snapshot, limits, timeoutMs: 30_000, onRequest: () => {} });
    expect(await forged.next()).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });

    const restored = sameSecret.restore({ snapshot, limits, timeoutMs: 30_000, onRequest: () => {} });
    expect(await restored.next()).toMatchObject({ type: "idle" });
    restored.settle(requests[0]?.requestId ?? "", { ok: true, value: "contents" });
    expect(await restored.next()).toMatchObject({ type: "completed", value: "contents" });
  });
});
