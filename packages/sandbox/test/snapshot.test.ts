import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type HostRequest, type SandboxPool } from "../src/index.js";
import { limits, surface } from "./helpers.js";

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  const otherPool = createSandboxPool({ size: 1 });
  const signed = createSandboxPool({ size: 1, snapshotSecret: "secret-a" });
  afterAll(() => Promise.all([pool.close(), otherPool.close(), signed.close()]));

  async function suspendedRun(target: SandboxPool, code: string, runLimits = limits) {
    const requests: HostRequest[] = [];
    const run = target.run({
      code,
      language: "javascript",
      surface,
      limits: runLimits,
      deadlineAt: Date.now() + 5_000,
      onRequest: (request) => requests.push(request),
    });
    const idle = await run.next();
    expect(idle.type).toBe("idle");
    return { run, requests, idle };
  }

  function restoreRun(target: SandboxPool, snapshot: Uint8Array, runLimits = limits) {
    const requests: HostRequest[] = [];
    const run = target.restore({
      snapshot,
      limits: runLimits,
      deadlineAt: Date.now() + 5_000,
      onRequest: (request) => requests.push(request),
    });
    return { run, requests };
  }

  describe("suspend and restore", () => {
    it("continues a suspended run in another pool, with its closures, output and pending calls", async () => {
      const code = `
      const seen = [];
      text("before");
      const first = await tools.call("core:host:read_file", { path: "a" });
      seen.push(first);
      const [second, third] = await Promise.all([Issues.list({}), yield_control("pause")]);
      seen.push(second, third === undefined);
      text("after");
      return { seen, total: ALL_TOOLS.length };
    `;
      const { run, idle } = await suspendedRun(pool, code);
      expect(idle).toMatchObject({ type: "idle", output: [{ type: "text", text: "before" }] });
      const suspended = await run.suspend();
      expect(suspended.bytes).toBe(suspended.snapshot.byteLength);
      // Budget: measured 155,608 bytes while the prelude's source text lived in every heap (and the first
      // run's heap also held the compiler's garbage); about 133,000 since the prelude is compiled without
      // its source, in a VM of its own.
      expect(suspended.bytes).toBeLessThan(150 * 1024);
      expect(suspended.pending).toMatchObject([{ kind: "call", target: "core:host:read_file" }]);

      const restored = restoreRun(otherPool, suspended.snapshot);
      const resumed = await restored.run.next();
      expect(resumed).toMatchObject({ type: "idle", pending: suspended.pending, output: [] });
      restored.run.settle(suspended.pending[0]!.requestId, { ok: true, value: "file-a" });
      const next = await restored.run.next();
      expect(next).toMatchObject({ type: "idle" });
      expect(restored.requests.map((request) => request.kind)).toEqual(["namespace", "yield"]);

      // Suspend again mid-flight and restore in the first pool.
      const again = await restored.run.suspend();
      const third = restoreRun(pool, again.snapshot);
      expect(await third.run.next()).toMatchObject({ type: "idle" });
      for (const request of again.pending)
        third.run.settle(request.requestId, { ok: true, value: request.kind === "yield" ? null : ["issue"] });
      expect(await third.run.next()).toEqual({
        type: "completed",
        value: { seen: ["file-a", ["issue"], true], total: 2 },
        output: [{ type: "text", text: "after" }],
      });
    });

    it("keeps the output byte count across a suspend", async () => {
      const small = { ...limits, maxOutputBytes: 2_048 };
      const { run } = await suspendedRun(
        pool,
        "text('a'.repeat(1_500)); await tools.call('x', {}); text('b'.repeat(1_000)); return 1",
        small,
      );
      const suspended = await run.suspend();
      const restored = restoreRun(otherPool, suspended.snapshot, small);
      await restored.run.next();
      restored.run.settle(suspended.pending[0]!.requestId, { ok: true, value: 1 });
      expect(await restored.run.next()).toMatchObject({ type: "failed", code: "output_limit_exceeded" });
    });

    it("refuses a snapshot over maxSnapshotBytes and keeps the run live", async () => {
      const tiny = { ...limits, maxSnapshotBytes: 1_024 };
      const { run, requests } = await suspendedRun(pool, "return await tools.call('x', {})", tiny);
      await expect(run.suspend()).rejects.toMatchObject({ code: "snapshot_limit_exceeded" });
      run.settle(requests[0]!.requestId, { ok: true, value: "still live" });
      expect(await run.next()).toMatchObject({ type: "completed", value: "still live" });
    });

    it("only suspends an idle run", async () => {
      const { run, requests } = await suspendedRun(pool, "return await tools.call('x', {})");
      run.settle(requests[0]!.requestId, { ok: true, value: 1 });
      await expect(run.suspend()).rejects.toMatchObject({ code: "invalid_input" });
      expect(await run.next()).toMatchObject({ type: "completed", value: 1 });
    });
  });

  describe("snapshots of another format", () => {
    // A real snapshot (unsigned) taken by an older codecell: format 2, whose prelude filed pending calls
    // under id strings and asked with host("request", body). The record's format version says so, and
    // the restore refuses it before reading anything else of it, saying what to do instead.
    const fixture = new URL("./fixtures/snapshot-string-request-ids.bin", import.meta.url);

    it("refuses an older codecell's snapshot with snapshot_restore_failed: run the cell again", async () => {
      const { run } = restoreRun(pool, new Uint8Array(readFileSync(fixture)));
      const event = await run.next();
      expect(event).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });
      if (event.type !== "failed") return;
      expect(event.message).toMatch(
        /suspended by an older codecell \(snapshot format 2; this one reads format 3 only\); run the cell again/,
      );
    });

    it("refuses a snapshot of a format it does not know, whatever else the bytes hold", async () => {
      const { run: live } = await suspendedRun(pool, "return await tools.call('x', {})");
      const { snapshot } = await live.suspend();
      for (const version of [0, 4, 255]) {
        const other = Uint8Array.from(snapshot);
        other[4] = version;
        const { run } = restoreRun(pool, other);
        const event = await run.next();
        expect(event).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });
        if (event.type === "failed") expect(event.message).toMatch(/run the cell again/);
      }
      // The snapshot as it was still restores: only the version was refused.
      const { run } = restoreRun(pool, snapshot);
      expect(await run.next()).toMatchObject({ type: "idle" });
      run.dispose();
    });
  });

  describe("snapshot_restore_failed", () => {
    async function goodSnapshot(target: SandboxPool = pool) {
      const { run } = await suspendedRun(target, "return await tools.call('x', {})");
      return (await run.suspend()).snapshot;
    }

    const corruptions: Array<{ name: string; corrupt: (bytes: Uint8Array) => Uint8Array }> = [
      {
        name: "a flipped byte in the VM image",
        corrupt: (bytes) => {
          const copy = bytes.slice();
          copy[copy.length - 10]! ^= 0xff;
          return copy;
        },
      },
      {
        name: "a flipped byte in the bridge state",
        corrupt: (bytes) => {
          const copy = bytes.slice();
          copy[50]! ^= 0x01;
          return copy;
        },
      },
      { name: "truncated bytes", corrupt: (bytes) => bytes.slice(0, bytes.length >> 1) },
      { name: "a bare header", corrupt: (bytes) => bytes.slice(0, 20) },
      {
        name: "random bytes",
        corrupt: (bytes) => Uint8Array.from(bytes, (_, index) => (index * 131 + 7) & 0xff),
      },
      { name: "empty bytes", corrupt: () => new Uint8Array(0) },
    ];
    it.each(corruptions)("refuses $name", async ({ corrupt }) => {
      const { run } = restoreRun(otherPool, corrupt(await goodSnapshot()));
      const event = await run.next();
      expect(event).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });
    });

    it("refuses a snapshot signed with another secret, and one that was not signed", async () => {
      const other = createSandboxPool({ size: 1, snapshotSecret: "secret-b" });
      try {
        const fromSigned = await goodSnapshot(signed);
        const wrong = await restoreRun(other, fromSigned).run.next();
        expect(wrong).toMatchObject({ type: "failed", code: "snapshot_restore_failed" });
        if (wrong.type === "failed") expect(wrong.message).toMatch(/signature/);
        expect(await restoreRun(signed, await goodSnapshot(pool)).run.next()).toMatchObject({
          code: "snapshot_restore_failed",
        });
        const right = restoreRun(signed, fromSigned);
        expect(await right.run.next()).toMatchObject({ type: "idle" });
        right.run.dispose();
      } finally {
        await other.close();
      }
    });
  });
});
