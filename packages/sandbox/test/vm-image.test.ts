import { randomFillSync } from "node:crypto";
import { QuickJS, type QuickJSOptions } from "quickjs-wasi";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { loadQuickJsModule } from "../src/wasm-module.js";
import { compileGuestPrelude } from "../src/worker/guest-prelude.js";
import { VmImage } from "../src/worker/vm-image.js";
import { limits, runToEnd, surface } from "./helpers.js";

/**
 * Every field of quickjs-wasi's VM object, each accounted for by the reset (vm-image.js): the cached
 * handles are put back, the host-callback table cleared, the library state a run may leave behind
 * (owned handles, promise waiters, an async failure, a scope, disposal) must be at rest or the VM is not
 * reset, and the rest is fixed for the VM's life or holds no VM state (codecs, version strings, the
 * handlers set when it was made, the counter naming ephemeral functions).
 */
const QUICKJS_VM_FIELDS = [
  "_activeScope",
  "_false",
  "_global",
  "_null",
  "_ownedHandles",
  "_true",
  "_undefined",
  "_versions",
  "asyncFailure",
  "decoder",
  "disposed",
  "encoder",
  "exports",
  "hostCallbacks",
  "hostSettlementDepth",
  "instance",
  "interruptHandler",
  "loadedExtensions",
  "module",
  "moduleLoadHandler",
  "moduleNormalizeHandler",
  "nextInternalId",
  "promiseWaiters",
  "timezoneOffsetHandler",
  "unhandledRejectionHandler",
];

describe("VmImage", () => {
  it("knows every field of quickjs-wasi's VM object (an upgrade that adds state must review the reset)", async () => {
    const vm = await QuickJS.create({ wasm: (await loadQuickJsModule()) as QuickJSOptions["wasm"] });
    try {
      expect(Object.keys(vm).sort()).toEqual(QUICKJS_VM_FIELDS);
    } finally {
      vm.dispose();
    }
  });

  it("is taken from a fresh VM of the shipped QuickJS build, and resets a used VM to it", async () => {
    const options = {
      wasm: (await loadQuickJsModule()) as QuickJSOptions["wasm"],
      memoryLimit: 32 << 20,
      maxStackSize: 256 * 1024,
      timezoneOffset: 0,
    };
    // As the worker does: the prelude compiled in a VM of its own, its bytecode evaluated in each VM.
    const compiler = await QuickJS.create(options);
    const bytecode = compileGuestPrelude(compiler);
    compiler.dispose();
    const vm = await QuickJS.create(options);
    try {
      vm.evalBytecode(bytecode);
      // Null would mean the probes failed on this build: every VM would be made fresh instead.
      const image = VmImage.capture(vm, (target) => randomFillSync(target)) as VmImage;
      expect(image).toBeInstanceOf(VmImage);
      const seen: unknown[] = [];
      for (let round = 0; round < 5; round++) {
        const read = vm.evalCode(
          "const r = JSON.stringify([typeof leftBehind, ({}).polluted === undefined, Math.random(), performance.now() < 1000]); globalThis.leftBehind = 1; Object.prototype.polluted = 1; r",
        );
        seen.push(JSON.parse(read.toString()));
        read.dispose();
        expect(image.fits(vm)).toBe(true);
        image.reset(vm);
      }
      for (const [leftBehind, polluted, , recent] of seen as [string, unknown, number, boolean][]) {
        expect([leftBehind, polluted, recent]).toEqual(["undefined", true, true]);
      }
      expect(new Set(seen.map((row) => (row as number[])[2])).size).toBe(seen.length);
      // A VM whose memory grew does not fit its image (it is dropped instead).
      vm.evalCode("globalThis.big = new Array(300000).fill(1)").dispose();
      expect(image.fits(vm)).toBe(false);
    } finally {
      vm.dispose();
    }
  });
});

/**
 * A worker makes the VM of a run that ended on its own fresh again for the next run (vm-image.js):
 * these cells run one after another on one worker, so from the third on each gets the VM of the one
 * before, reset. Each must see exactly what a fresh VM shows, whatever the cell before it did. (That
 * the worker does reset its VMs, rather than make new ones, is what vm-memory-release.test.ts counts.)
 */
const pool = createSandboxPool({ size: 1, maxWorkers: 1 });
afterAll(() => pool.close());

/** Checks a fresh VM passes (each true), then vandalises everything a next run could see. */
const CHECK_AND_VANDALISE = `
  const checks = [
    typeof globalThis.leftBehind === "undefined",
    ({}).polluted === undefined,
    Array.prototype.push.toString().includes("[native code]"),
    Math.max(1, 2) === 2,
    typeof JSON.stringify === "function",
    typeof tools.call === "function",
    Object.isFrozen(ALL_TOOLS),
  ];
  globalThis.leftBehind = { secret: "from the run before" };
  Object.prototype.polluted = true;
  Array.prototype.push = function () { return "hijacked"; };
  Math.max = () => -1;
  delete globalThis.JSON;
  return checks;
`;

const ALL_TRUE = [true, true, true, true, true, true, true];

async function expectFresh() {
  const { event } = await runToEnd(pool, CHECK_AND_VANDALISE, { surface });
  expect(event).toMatchObject({ type: "completed", value: ALL_TRUE });
}

describe("a worker's VMs, reset for the next run", () => {
  it("show no trace of the run before: globals, prototypes and built-ins are fresh", async () => {
    for (let cell = 0; cell < 12; cell++) await expectFresh();
  });

  it("give every run its own Math.random sequence and a time origin of its own", async () => {
    const firsts: number[] = [];
    const origins: number[] = [];
    const testStartedAt = Date.now();
    for (let cell = 0; cell < 16; cell++) {
      await new Promise((resolve) => setTimeout(resolve, 3));
      const { event } = await runToEnd(
        pool,
        "return [Math.random(), Math.random(), performance.timeOrigin, performance.now()];",
      );
      expect(event.type).toBe("completed");
      if (event.type !== "completed") return;
      const [first, second, timeOrigin, now] = event.value as [number, number, number, number];
      expect(first).not.toBe(second);
      firsts.push(first);
      expect(timeOrigin).toBeLessThanOrEqual(Date.now());
      expect(now).toBeGreaterThanOrEqual(0);
      expect(now).toBeLessThan(5_000);
      origins.push(timeOrigin);
    }
    expect(new Set(firsts).size).toBe(firsts.length);
    // The origin is when the VM was made ready (reset after a run ended, or made), in whole
    // milliseconds, not when the worker took its image: with cells 3 ms apart nearly every run's differs.
    // (Under load a worker may hold a spare readied one run earlier, so they need not increase.)
    expect(new Set(origins).size).toBeGreaterThanOrEqual(12);
    expect(Math.min(...origins)).toBeGreaterThan(testStartedAt - 60_000);
  });

  it("stay fresh after runs that threw, timed out, ran out of memory or grew memory", async () => {
    await expectFresh();
    const endings: { code: string; expected: Record<string, unknown>; timeoutMs?: number }[] = [
      { code: "globalThis.leftBehind = 1; throw new Error('boom');", expected: { type: "failed" } },
      {
        code: "globalThis.leftBehind = 1; for (;;) {}",
        expected: { type: "failed", code: "timeout" },
        timeoutMs: 200,
      },
      {
        code: "globalThis.leftBehind = 1; const a = []; for (;;) a.push('x'.repeat(1000) + a.length);",
        expected: { type: "failed", code: "memory_limit_exceeded" },
      },
      {
        code: "globalThis.leftBehind = 1; const a = new Array(300000).fill(7); return a.length;",
        expected: { type: "completed", value: 300000 },
      },
    ];
    for (const ending of endings) {
      const { event } = await runToEnd(pool, ending.code, {
        surface,
        deadlineAt: Date.now() + 10_000,
        ...(ending.timeoutMs === undefined ? {} : { timeoutMs: ending.timeoutMs }),
      });
      expect(event).toMatchObject(ending.expected);
      await expectFresh();
      await expectFresh();
    }
  });

  it("stay fresh after a run disposed with calls pending, and after a suspend whose snapshot still restores", async () => {
    await expectFresh();
    const disposed = await runToEnd(pool, "globalThis.leftBehind = 1; await tools.call('x', {}); return 1;", {
      surface,
      stopOnIdle: true,
    });
    expect(disposed.event.type).toBe("idle");
    disposed.run.dispose();
    await expectFresh();
    await expectFresh();

    const code =
      "const kept = { n: 41 }; globalThis.leftBehind = 1; await tools.call('x', {}); return kept.n + 1;";
    const suspending = await runToEnd(pool, code, { surface, stopOnIdle: true });
    expect(suspending.event.type).toBe("idle");
    const suspended = await suspending.run.suspend();
    await expectFresh();
    await expectFresh();
    const restored = pool.restore({
      snapshot: suspended.snapshot,
      limits,
      deadlineAt: Date.now() + 5_000,
      onRequest: () => {},
    });
    const idle = await restored.next();
    expect(idle.type).toBe("idle");
    if (idle.type !== "idle") return;
    restored.settle((idle.pending[0] ?? suspended.pending[0])?.requestId as string, {
      ok: true,
      value: null,
    });
    expect(await restored.next()).toMatchObject({ type: "completed", value: 42 });
    await expectFresh();
  });
});
