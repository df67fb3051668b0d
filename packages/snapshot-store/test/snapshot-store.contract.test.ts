import { CodeModeError, type CodeModeErrorCode } from "@codecell/contract";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { redisRequired, redisSkipReason } from "../../../scripts/redis-server.mjs";
import { newRunId } from "../src/run-id.js";
import { openSnapshotStore, type SnapshotStore, type SnapshotStoreOptions } from "../src/snapshot-store.js";
import { CALLER_SCOPE_FIELDS, type SnapshotStoreEvent } from "../src/types.js";
import {
  type BackendFactory,
  manualClock,
  memoryFactory,
  patternBytes,
  redisFactory,
  scopeFor,
  sqliteFactory,
  suspendInput,
} from "./support/fixtures.js";

async function thrown(action: () => Promise<unknown>): Promise<CodeModeError> {
  try {
    await action();
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("expected the action to throw a CodeModeError, but it succeeded");
}

if (redisSkipReason) console.warn(redisSkipReason);

// Counted on its own, so a CI run that demands Redis reports a failed test, not only skipped ones.
it("finds redis-server when CODECELL_REQUIRE_REDIS=1 demands the Redis tests", () => {
  if (redisRequired) expect(redisSkipReason).toBeNull();
});

// One suite, run unchanged against every backend: the definition of what a backend must do.
describe.each([
  memoryFactory(),
  sqliteFactory(),
  sqliteFactory(true),
  ...(redisSkipReason ? [] : [redisFactory()]),
])("snapshot store contract: $name backend", (factory: BackendFactory) => {
  const stores: SnapshotStore[] = [];
  beforeAll(async () => {
    await factory.setup?.();
  });
  afterAll(async () => {
    await factory.teardown?.();
  });
  let clock = manualClock();
  let events: SnapshotStoreEvent[] = [];

  async function open(options: SnapshotStoreOptions = {}): Promise<SnapshotStore> {
    const store = await openSnapshotStore({
      backend: factory.create(),
      clock: clock.now,
      sweepIntervalMs: 0,
      onEvent: (event) => events.push(event),
      ...options,
    });
    stores.push(store);
    return store;
  }

  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    factory.cleanup();
    clock = manualClock();
    events = [];
  });

  it("stores a suspended run under an unguessable runId and gives it back to the same scope", async () => {
    const store = await open();
    const input = suspendInput({ hostState: { requests: { "call-1": 1 } } });
    const stored = await store.suspend(input);
    expect(stored.runId).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(stored.expiresAt).toBe(clock.now() + 900_000);
    expect(stored.bytes).toBeGreaterThan(input.snapshot.byteLength);
    expect(events).toEqual([{ event: "stored", runId: stored.runId, bytes: stored.bytes, at: clock.now() }]);

    const claim = await store.claim(stored.runId, scopeFor());
    expect(claim.runId).toBe(stored.runId);
    expect(claim.scope).toEqual(scopeFor());
    expect(Buffer.from(claim.snapshot).equals(Buffer.from(input.snapshot))).toBe(true);
    expect(claim.pendingCalls).toEqual(input.pendingCalls);
    expect(claim.output).toEqual(input.output);
    expect(claim.telemetry).toEqual(input.telemetry);
    expect(claim.hostState).toEqual({ requests: { "call-1": 1 } });
    expect(claim.resumeCount).toBe(1);
    expect(events.at(-1)).toMatchObject({ event: "resumed", runId: stored.runId, bytes: stored.bytes });
  });

  it("gives every run a distinct id", async () => {
    const store = await open({ maxLiveRuns: 200, maxLiveRunsPerPrincipal: 200 });
    const ids = new Set<string>();
    for (let index = 0; index < 200; index += 1) ids.add((await store.suspend(suspendInput())).runId);
    expect(ids.size).toBe(200);
  });

  it.each([
    ["Uint8Array", (bytes: Uint8Array) => bytes],
    ["Buffer", (bytes: Uint8Array) => Buffer.from(bytes)],
    [
      "view into a larger buffer",
      (bytes: Uint8Array) => new Uint8Array([9, 9, ...bytes, 9]).subarray(2, 2 + bytes.length),
    ],
  ])("keeps the stored bytes apart from the caller's %s", async (_label, wrap) => {
    const store = await open();
    const snapshot = wrap(patternBytes(512, 3));
    const { runId } = await store.suspend(suspendInput({ snapshot }));
    snapshot.fill(0);
    const claim = await store.claim(runId, scopeFor());
    expect(claim.snapshot).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(claim.snapshot).equals(Buffer.from(patternBytes(512, 3)))).toBe(true);
    claim.snapshot.fill(1);
    await store.release(claim);
    const again = await store.claim(runId, scopeFor());
    expect(Buffer.from(again.snapshot).equals(Buffer.from(patternBytes(512, 3)))).toBe(true);
  });

  describe("scope: a caller outside the run's scope gets exactly the unknown-runId answer", () => {
    const otherValue = (field: string) => `${field}-of-someone-else`;
    it.each(CALLER_SCOPE_FIELDS.map((field) => [field]))("a different %s", async (field) => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const mismatch = await thrown(() => store.claim(runId, scopeFor({ [field]: otherValue(field) })));
      const unknownId = newRunId();
      const unknown = await thrown(() => store.claim(unknownId, scopeFor()));
      expect(mismatch.code).toBe("invalid_input");
      expect(mismatch.message).toContain("unknown runId");
      expect(mismatch.message.replace(runId, "<id>")).toBe(unknown.message.replace(unknownId, "<id>"));
      expect(mismatch.details).toEqual(unknown.details);
      // The mismatch neither claimed nor damaged the run.
      const claim = await store.claim(runId, scopeFor());
      expect(claim.resumeCount).toBe(1);
      expect(events.filter((event) => event.event === "refused").map((event) => event.reason)).toEqual([
        "scope_mismatch",
        "unknown_run",
      ]);
    });

    it("does not compare toolCallId: the wait is a tool call of its own", async () => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const { toolCallId: _execCall, ...caller } = scopeFor();
      const claim = await store.claim(runId, { ...caller, toolCallId: "toolu_wait_7" } as never);
      expect(claim.scope.toolCallId).toBe("toolu_exec_1");
      await store.release(claim);
      expect((await store.claim(runId, caller)).resumeCount).toBe(2);
    });

    it("refuses a caller scope with a missing field as invalid input, not as unknown", async () => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const { parentRunId: _missing, ...caller } = scopeFor();
      const error = await thrown(() => store.claim(runId, caller as never));
      expect(error.code).toBe("invalid_input");
      expect(error.message).toContain("scope.parentRunId");
    });

    it("also for an aborted, expired or finished run of another scope", async () => {
      const store = await open();
      const aborted = await store.suspend(suspendInput());
      await store.abort({ runId: aborted.runId });
      const expired = await store.suspend(suspendInput({ ttlSeconds: 1 }));
      const finished = await store.suspend(suspendInput({ ttlSeconds: 60 }));
      await store.finish(await store.claim(finished.runId, scopeFor()), "completed");
      clock.advance(1_000);
      for (const runId of [aborted.runId, expired.runId, finished.runId]) {
        const error = await thrown(() => store.claim(runId, scopeFor({ sessionId: "session-2" })));
        expect(error.code).toBe("invalid_input");
        expect(error.message).toContain("unknown runId");
      }
    });
  });

  it("refuses ids that are not run ids like unknown ones", async () => {
    const store = await open();
    for (const runId of ["", "x", "../../etc/passwd", "a".repeat(10_000)]) {
      const error = await thrown(() => store.claim(runId, scopeFor()));
      expect(error.code).toBe("invalid_input");
      expect(error.message).toContain("unknown runId");
      expect(error.message.length).toBeLessThan(400);
    }
  });

  it("refuses a second claim while the first holds the run, and allows one after the lease runs out", async () => {
    const store = await open({ claimLeaseMs: 5_000 });
    const { runId } = await store.suspend(suspendInput());
    const first = await store.claim(runId, scopeFor());
    const busy = await thrown(() => store.claim(runId, scopeFor()));
    expect(busy.code).toBe("invalid_input");
    expect(busy.message).toContain("already being resumed");
    expect(events.at(-1)).toMatchObject({ event: "refused", reason: "already_claimed" });

    clock.advance(5_000);
    const second = await store.claim(runId, scopeFor());
    expect(second.resumeCount).toBe(2);
    const stale = await thrown(() => store.finish(first, "completed"));
    expect(stale.code).toBe("internal_error");
    expect(stale.message).toContain("no longer valid");
    await store.finish(second, "completed");
  });

  it("refuses concurrent claims issued at the same moment: exactly one wins", async () => {
    const store = await open();
    const { runId } = await store.suspend(suspendInput());
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => store.claim(runId, scopeFor())));
    expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(1);
  });

  describe("settling pending calls while the run waits", () => {
    it("records outcomes, first one wins, and hands them to the next claim", async () => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      expect(await store.settleCall(runId, "call-1", { ok: true, value: { text: "hello" } })).toBe(
        "recorded",
      );
      expect(await store.settleCall(runId, "call-1", { ok: true, value: "late duplicate" })).toBe(
        "already_settled",
      );
      expect(await store.settleCall(runId, "call-9", { ok: true, value: null })).toBe("unknown_call");
      expect(await store.settleCall(newRunId(), "call-1", { ok: true, value: null })).toBe("run_gone");
      const failure = {
        ok: false as const,
        error: { name: "Error", message: "rate limited", code: "nested_tool_failed" as const },
      };
      expect(await store.settleCall(runId, "call-2", failure)).toBe("recorded");

      const claim = await store.claim(runId, scopeFor());
      expect(claim.pendingCalls.map((call) => call.outcome)).toEqual([
        { ok: true, value: { text: "hello" } },
        failure,
      ]);
      expect(claim.pendingCalls[0]?.settledAt).toBe(new Date(clock.now()).toISOString());
    });

    it("records outcomes that arrive during a claim and keeps them through a resuspend", async () => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const claim = await store.claim(runId, scopeFor());
      expect(await store.settleCall(runId, "call-2", { ok: true, value: 42 })).toBe("recorded");
      // The engine delivered call-1 itself and suspends again still owing call-2 and a new call-3.
      await store.resuspend(claim, {
        ...suspendInput(),
        snapshot: patternBytes(1024, 11),
        pendingCalls: [
          { callId: "call-2", toolId: "mcp__github__create_issue", startedAt: "2026-01-01T00:00:00.010Z" },
          {
            callId: "call-3",
            toolId: "core__search",
            startedAt: "2026-01-01T00:00:01.000Z",
            outcome: { ok: true, value: [] },
          },
        ],
      });
      const again = await store.claim(runId, scopeFor());
      expect(again.pendingCalls.map((call) => [call.callId, call.outcome])).toEqual([
        ["call-2", { ok: true, value: 42 }],
        ["call-3", { ok: true, value: [] }],
      ]);
    });

    it("stores a run under the id its caller chose with newRunId(), refusing a malformed or taken one", async () => {
      const store = await open();
      const chosen = newRunId();
      expect((await store.suspend({ ...suspendInput(), runId: chosen })).runId).toBe(chosen);
      expect((await store.claim(chosen, scopeFor())).runId).toBe(chosen);
      expect((await thrown(() => store.suspend({ ...suspendInput(), runId: chosen }))).code).toBe(
        "internal_error",
      );
      expect((await thrown(() => store.suspend({ ...suspendInput(), runId: "run-1" }))).code).toBe(
        "invalid_input",
      );
    });

    it.each([
      ["not an object", "yes"],
      ["no ok flag", { value: 1 }],
      ["success without value", { ok: true }],
      ["failure without message", { ok: false, error: { name: "Error" } }],
      ["value that is not JSON", { ok: true, value: 10n }],
    ])("refuses an outcome that is %s", async (_label, outcome) => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const error = await thrown(() => store.settleCall(runId, "call-1", outcome as never));
      expect(error.code).toBe("invalid_input");
    });
  });

  it("suspends again under the same runId with a fresh TTL and finishes with the snapshot deleted", async () => {
    const store = await open({ snapshotTtlSeconds: 60 });
    const { runId } = await store.suspend(suspendInput());
    clock.advance(50_000);
    const claim = await store.claim(runId, scopeFor());
    const again = await store.resuspend(claim, {
      ...suspendInput(),
      snapshot: patternBytes(4096, 99),
      pendingCalls: [],
    });
    expect(again.runId).toBe(runId);
    expect(again.expiresAt).toBe(clock.now() + 60_000);
    clock.advance(50_000);
    const second = await store.claim(runId, scopeFor());
    expect(Buffer.from(second.snapshot).equals(Buffer.from(patternBytes(4096, 99)))).toBe(true);
    expect(second.resumeCount).toBe(2);
    const reused = await thrown(() => store.resuspend(claim, suspendInput()));
    expect(reused.code).toBe("internal_error");

    await store.finish(second, "completed");
    expect(events.at(-1)).toMatchObject({ event: "deleted", runId, reason: "completed" });
    expect(await store.stats()).toMatchObject({ live: 0, tombstones: 1, liveBytes: 0 });
    const done = await thrown(() => store.claim(runId, scopeFor()));
    expect(done.code).toBe("invalid_input");
    expect(done.message).toContain("already completed");
  });

  it("release puts a claimed run back unchanged", async () => {
    const store = await open();
    const { runId } = await store.suspend(suspendInput());
    const claim = await store.claim(runId, scopeFor());
    expect(await store.stats()).toMatchObject({ live: 1, running: 1, waiting: 0 });
    await store.release(claim);
    expect(await store.stats()).toMatchObject({ live: 1, running: 0, waiting: 1 });
    const again = await store.claim(runId, scopeFor());
    expect(Buffer.from(again.snapshot).equals(Buffer.from(claim.snapshot))).toBe(true);
    await expect(store.release(claim)).rejects.toMatchObject({ code: "internal_error" });
  });

  describe("expiry", () => {
    it("refuses a run past its TTL lazily, then keeps saying it expired", async () => {
      const store = await open({ snapshotTtlSeconds: 30 });
      const { runId, bytes } = await store.suspend(suspendInput());
      clock.advance(29_999);
      await store.release(await store.claim(runId, scopeFor()));
      clock.advance(1);
      for (let attempt = 0; attempt < 2; attempt += 1) {
        const error = await thrown(() => store.claim(runId, scopeFor()));
        expect(error.code).toBe("snapshot_expired");
        expect(error.message).toContain("TTL");
      }
      expect(events.filter((event) => event.event === "expired")).toEqual([
        { event: "expired", runId, bytes, at: clock.now() },
      ]);
      expect(await store.settleCall(runId, "call-1", { ok: true, value: 1 })).toBe("run_gone");
      expect(await store.stats()).toMatchObject({ live: 0, tombstones: 1 });
    });

    it("sweeps expired runs, leaves claimed and fresh ones, and purges old tombstones", async () => {
      const store = await open({ snapshotTtlSeconds: 60, tombstoneSeconds: 600, claimLeaseMs: 120_000 });
      const old = await store.suspend(suspendInput({ ttlSeconds: 10 }));
      const claimed = await store.suspend(suspendInput({ ttlSeconds: 10 }));
      const fresh = await store.suspend(suspendInput());
      const claim = await store.claim(claimed.runId, scopeFor());
      clock.advance(10_000);
      expect(await store.sweep()).toEqual({ expired: 1, purged: 0 });
      expect(events.filter((event) => event.event === "expired").map((event) => event.runId)).toEqual([
        old.runId,
      ]);
      expect(await store.stats()).toMatchObject({ live: 2, tombstones: 1 });
      await expect(store.claim(old.runId, scopeFor())).rejects.toMatchObject({ code: "snapshot_expired" });
      await store.finish(claim, "failed");
      await store.release(await store.claim(fresh.runId, scopeFor()));

      clock.advance(600_000);
      expect(await store.sweep()).toEqual({ expired: 1, purged: 2 });
      clock.advance(600_000);
      expect(await store.sweep()).toEqual({ expired: 0, purged: 1 });
      expect(await store.stats()).toEqual({ live: 0, waiting: 0, running: 0, tombstones: 0, liveBytes: 0 });
      await expect(store.claim(old.runId, scopeFor())).rejects.toMatchObject({ code: "invalid_input" });
    });

    it("sweeps more runs than one batch in a single call, letting the event loop run", async () => {
      const store = await open({
        maxLiveRuns: 1_300,
        maxLiveRunsPerPrincipal: 1_300,
        snapshotTtlSeconds: 10,
      });
      const small = suspendInput({ snapshot: patternBytes(64, 1), pendingCalls: [] });
      for (let index = 0; index < 1_200; index += 1) await store.suspend(small);
      clock.advance(10_000);
      let ticks = 0;
      const ticker = setInterval(() => {
        ticks += 1;
      }, 0);
      try {
        expect(await store.sweep()).toEqual({ expired: 1_200, purged: 0 });
      } finally {
        clearInterval(ticker);
      }
      expect(events.filter((event) => event.event === "expired")).toHaveLength(1_200);
      expect(await store.stats()).toMatchObject({ live: 0, tombstones: 1_200 });
      if (factory.name === "sqlite") expect(ticks).toBeGreaterThan(0);
      clock.advance(3_600_000);
      expect(await store.sweep()).toEqual({ expired: 0, purged: 1_200 });
    });

    it("expires a run whose claim lease ran out", async () => {
      const store = await open({ snapshotTtlSeconds: 10, claimLeaseMs: 20_000 });
      const { runId } = await store.suspend(suspendInput());
      await store.claim(runId, scopeFor());
      clock.advance(15_000);
      expect((await store.sweep()).expired).toBe(0);
      clock.advance(5_000);
      expect((await store.sweep()).expired).toBe(1);
    });
  });

  describe("abort", () => {
    it.each([
      ["the exec run", (runId: string) => ({ runId })],
      ["the parent agent run", () => ({ parentRunId: "agent-run-1" })],
      ["the session", () => ({ sessionId: "session-1" })],
      ["the session key and agent", () => ({ sessionKey: "agent:main:chat-1", agentId: "agent-main" })],
    ])("by %s deletes the snapshot and later claims answer aborted", async (_label, selectorOf) => {
      const store = await open();
      const target = await store.suspend(suspendInput());
      const bystander = await store.suspend(
        suspendInput({
          scope: scopeFor({
            sessionId: "session-2",
            sessionKey: "agent:main:chat-2",
            parentRunId: "agent-run-2",
          }),
        }),
      );
      expect(await store.abort(selectorOf(target.runId), "run_aborted")).toBe(1);
      expect(events.at(-1)).toMatchObject({
        event: "aborted",
        runId: target.runId,
        reason: "run_aborted",
        bytes: target.bytes,
      });
      const error = await thrown(() => store.claim(target.runId, scopeFor()));
      expect(error.code).toBe("aborted");
      expect(await store.settleCall(target.runId, "call-1", { ok: true, value: 1 })).toBe("run_gone");
      expect(await store.stats()).toMatchObject({ live: 1, tombstones: 1 });
      const other = await store.claim(
        bystander.runId,
        scopeFor({ sessionId: "session-2", sessionKey: "agent:main:chat-2", parentRunId: "agent-run-2" }),
      );
      expect(other.runId).toBe(bystander.runId);
    });

    it("aborts a run that is being resumed; the resumer's finish answers aborted", async () => {
      const store = await open();
      const { runId } = await store.suspend(suspendInput());
      const claim = await store.claim(runId, scopeFor());
      expect(await store.endSession({ sessionId: "session-1" })).toBe(1);
      expect(events.at(-1)).toMatchObject({ event: "aborted", reason: "session_ended" });
      await expect(store.resuspend(claim, suspendInput())).rejects.toMatchObject({ code: "aborted" });
      await expect(store.finish(claim, "completed")).rejects.toMatchObject({ code: "aborted" });
    });

    it.each([
      ["empty", {}, "at least one"],
      ["misspelt", { sesionId: "session-1" }, 'Did you mean "sessionId"'],
      ["empty value", { sessionId: "" }, "non-empty string"],
    ])("refuses a selector that is %s", async (_label, selector, hint) => {
      const store = await open();
      await store.suspend(suspendInput());
      const error = await thrown(() => store.abort(selector as never));
      expect(error.code).toBe("invalid_input");
      expect(error.message).toContain(hint);
      expect(await store.stats()).toMatchObject({ live: 1 });
    });
  });

  describe("limits", () => {
    it("refuses a record over maxSnapshotBytes with snapshot_limit_exceeded", async () => {
      const store = await open({ maxSnapshotBytes: 4096 });
      const error = await thrown(() => store.suspend(suspendInput({ snapshot: patternBytes(4096, 1) })));
      expect(error.code).toBe("snapshot_limit_exceeded");
      expect(error.message).toContain("maxSnapshotBytes 4096");
      expect(error.details).toMatchObject({ snapshotBytes: 4096, maxSnapshotBytes: 4096 });
      expect(events).toEqual([expect.objectContaining({ event: "refused", reason: "too_large" })]);
      expect(await store.stats()).toMatchObject({ live: 0 });
    });

    it("replaces an outcome too big for the record by an error outcome the guest can read", async () => {
      const store = await open({ maxSnapshotBytes: 4096 });
      const { runId } = await store.suspend(suspendInput({ snapshot: patternBytes(2048, 1) }));
      const big = { ok: true as const, value: "x".repeat(3000) };
      expect(await store.settleCall(runId, "call-1", big)).toBe("recorded_as_too_large");
      const claim = await store.claim(runId, scopeFor());
      const outcome = claim.pendingCalls[0]?.outcome;
      expect(outcome).toMatchObject({ ok: false, error: { code: "snapshot_limit_exceeded" } });
    });

    it("refuses a resuspend over the cap and keeps the claim usable to finish the run", async () => {
      const store = await open({ maxSnapshotBytes: 4096 });
      const { runId } = await store.suspend(suspendInput());
      const claim = await store.claim(runId, scopeFor());
      await expect(
        store.resuspend(claim, suspendInput({ snapshot: patternBytes(8192, 1) })),
      ).rejects.toMatchObject({
        code: "snapshot_limit_exceeded",
      });
      await store.finish(claim, "failed");
      expect(events.at(-1)).toMatchObject({ event: "deleted", reason: "failed" });
    });

    it("refuses a new run when maxLiveRuns are live, evicting nothing", async () => {
      const store = await open({ maxLiveRuns: 3, maxLiveRunsPerPrincipal: 3 });
      const runs = [];
      for (let index = 0; index < 3; index += 1) runs.push(await store.suspend(suspendInput()));
      const full = await thrown(() => store.suspend(suspendInput()));
      expect(full.code).toBe("snapshot_limit_exceeded");
      expect(full.message).toContain("maxLiveRuns");
      expect(full.details).toEqual({ live: 3, maxLiveRuns: 3, maxLiveRunsPerPrincipal: 3 });
      expect(events.at(-1)).toMatchObject({ event: "refused", reason: "store_full" });
      const claims = [];
      for (const run of runs) claims.push(await store.claim(run.runId, scopeFor()));
      await store.finish(claims[0]!, "completed");
      // Tombstones do not count against the cap.
      await store.suspend(suspendInput());
      await expect(store.suspend(suspendInput())).rejects.toMatchObject({
        code: "snapshot_limit_exceeded",
      });
    });

    it("gives each principal a share of maxLiveRuns, and a refusal names only the caller's own runs", async () => {
      const store = await open({ maxLiveRuns: 6 });
      const as = (sessionKey: string, agentId = "agent-main") =>
        suspendInput({ scope: scopeFor({ sessionKey, agentId }) });
      // The default share is half of maxLiveRuns: one principal's cheap waiting runs stop at three.
      const mallorys = [];
      for (let index = 0; index < 3; index += 1) mallorys.push(await store.suspend(as("principal:mallory")));
      const own = await thrown(() => store.suspend(as("principal:mallory")));
      expect(own.code).toBe("snapshot_limit_exceeded");
      expect(own.message).toContain("this caller already has 3 suspended runs live");
      expect(own.message).toContain("its limit is 3 (maxLiveRunsPerPrincipal");
      expect(own.details).toEqual({ live: 3, maxLiveRunsPerPrincipal: 3 });
      expect(own.message).not.toMatch(/maxLiveRuns\b/);
      // Another principal, and the same session key under another agent, still get their share.
      for (let index = 0; index < 2; index += 1) await store.suspend(as("principal:alice"));
      await store.suspend(as("principal:mallory", "agent-other"));
      // The store is full now: the refusal tells the caller its own count (none), not everyone's.
      const full = await thrown(() => store.suspend(as("principal:bob")));
      expect(full.code).toBe("snapshot_limit_exceeded");
      expect(full.message).toContain("this caller has 0 of them");
      expect(full.message).not.toMatch(/\b6 suspended runs\b|\b[1-6] suspended runs are already live/);
      expect(full.details).toEqual({ live: 0, maxLiveRuns: 6, maxLiveRunsPerPrincipal: 3 });
      // A principal's finished run gives its place back, to that principal or another.
      const claim = await store.claim(mallorys[0]!.runId, scopeFor({ sessionKey: "principal:mallory" }));
      await store.finish(claim, "completed");
      await store.suspend(as("principal:bob"));
    });

    it("counts concurrent suspends of one principal atomically against its share", async () => {
      const store = await open({ maxLiveRuns: 64, maxLiveRunsPerPrincipal: 5 });
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.suspend(suspendInput())),
      );
      expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(5);
      expect((await store.stats()).live).toBe(5);
    });
  });

  describe("input validation", () => {
    const cases: [string, () => Parameters<SnapshotStore["suspend"]>[0], string][] = [
      [
        "a missing scope field",
        () => ({ ...suspendInput(), scope: { ...scopeFor(), sessionId: "" } }),
        "scope.sessionId",
      ],
      ["a snapshot that is not bytes", () => ({ ...suspendInput(), snapshot: "abc" as never }), "Uint8Array"],
      ["an empty snapshot", () => suspendInput({ snapshot: new Uint8Array(0) }), "empty"],
      [
        "duplicate call ids",
        () =>
          suspendInput({ pendingCalls: [0, 1].map(() => ({ callId: "c", toolId: "t", startedAt: "s" })) }),
        "appears twice",
      ],
      [
        "a call without toolId",
        () => suspendInput({ pendingCalls: [{ callId: "c", toolId: "", startedAt: "s" }] }),
        "toolId",
      ],
      ["a TTL out of range", () => suspendInput({ ttlSeconds: 0 }), "ttlSeconds"],
      ["output that is not JSON", () => suspendInput({ output: [{ type: "json", value: 1n }] }), "output"],
    ];
    it.each(cases)("refuses %s with invalid_input", async (_label, input, hint) => {
      const store = await open();
      const error = await thrown(() => store.suspend(input()));
      expect(error.code).toBe("invalid_input");
      expect(error.message).toContain(hint);
      expect(await store.stats()).toMatchObject({ live: 0 });
    });

    it.each([
      [{ maxLiveRuns: 0 }],
      [{ maxLiveRunsPerPrincipal: 0 }],
      [{ maxLiveRuns: 4, maxLiveRunsPerPrincipal: 5 }],
      [{ maxSnapshotBytes: -1 }],
      [{ snapshotTtlSeconds: 86_401 }],
      [{ sweepIntervalMs: 1.5 }],
    ])("refuses option %j with invalid_config", async (options) => {
      const error = await thrown(() => openSnapshotStore({ backend: factory.create(), ...options }));
      expect(error.code satisfies CodeModeErrorCode).toBe("invalid_config");
    });
  });

  it("sweeps on a timer without being asked", async () => {
    const store = await open({ clock: Date.now, snapshotTtlSeconds: 1, sweepIntervalMs: 50 });
    const { runId } = await store.suspend(suspendInput());
    await vi.waitFor(
      () => expect(events.some((event) => event.event === "expired" && event.runId === runId)).toBe(true),
      {
        timeout: 5_000,
        interval: 50,
      },
    );
  });

  it("survives a listener that throws", async () => {
    const warning = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    try {
      const store = await open({
        onEvent: () => {
          throw new Error("listener bug");
        },
      });
      const { runId } = await store.suspend(suspendInput());
      await store.finish(await store.claim(runId, scopeFor()), "completed");
      expect(warning).toHaveBeenCalledTimes(1);
    } finally {
      warning.mockRestore();
    }
  });

  it("keeps host records per owner with a TTL, and lets exactly one delete take a record", async () => {
    // Redis expires host records on its own clock, so this store's clock is the real one.
    const realClock = manualClock(Date.now());
    const store = await open({ clock: realClock.now });
    const key = { kind: "agent-transcript", owner: "alice", id: "conversation-1" };
    await store.putHostRecord(key, { turns: [1, 2, 3] }, 1);
    expect(await store.getHostRecord(key)).toEqual({ turns: [1, 2, 3] });
    // Another owner with the same kind and id sees nothing and cannot delete it.
    expect(await store.getHostRecord({ ...key, owner: "bob" })).toBeNull();
    expect(await store.deleteHostRecord({ ...key, owner: "bob" })).toBe(false);
    // An owner cannot spell another's key through the separator.
    expect(
      await store.getHostRecord({ kind: "agent-transcript/alice", owner: "conversation-1", id: "x" }),
    ).toBeNull();
    await store.putHostRecord(key, { turns: [4] }, 1);
    expect(await store.getHostRecord(key)).toEqual({ turns: [4] });
    const takes = await Promise.all([store.deleteHostRecord(key), store.deleteHostRecord(key)]);
    expect(takes.sort()).toEqual([false, true]);
    expect(await store.getHostRecord(key)).toBeNull();
    await store.putHostRecord(key, "short-lived", 1);
    realClock.advance(1_100);
    if (factory.name.includes("redis")) await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await store.getHostRecord(key)).toBeNull();
    const tooBig = await open({ maxSnapshotBytes: 1024, clock: realClock.now });
    expect((await thrown(() => tooBig.putHostRecord(key, "x".repeat(2000)))).code).toBe(
      "snapshot_limit_exceeded",
    );
    expect((await thrown(() => store.getHostRecord({ ...key, owner: "" }))).code).toBe("invalid_input");
  });

  it("gives a host-record lease to one holder at a time, until it is released or runs out", async () => {
    // Redis expires leases on its own clock, so this store's clock is the real one.
    const realClock = manualClock(Date.now());
    const store = await open({ clock: realClock.now });
    const record = { kind: "agent-conversation", owner: "alice", id: "c-1" };
    const lease = { kind: "agent-conversation-lease", owner: "alice", id: "c-1" };
    await store.putHostRecord(record, { turns: [1] }, 60);
    // Of two holders asking at once, exactly one gets it; the record beside it stays.
    const taken = await Promise.all([
      store.leaseHostRecord(lease, "holder-a", 60),
      store.leaseHostRecord(lease, "holder-b", 60),
    ]);
    expect(taken.sort()).toEqual([false, true]);
    const holder = (await store.leaseHostRecord(lease, "holder-a", 60)) ? "holder-a" : "holder-b";
    const other = holder === "holder-a" ? "holder-b" : "holder-a";
    expect(await store.getHostRecord(record)).toEqual({ turns: [1] });
    // Its holder renews it; another owner's key of the same id is a lease of its own.
    expect(await store.leaseHostRecord(lease, holder, 60)).toBe(true);
    expect(await store.leaseHostRecord(lease, other, 60)).toBe(false);
    expect(await store.leaseHostRecord({ ...lease, owner: "bob" }, other, 60)).toBe(true);
    // Only its holder releases it; then the other takes it.
    expect(await store.releaseHostRecord(lease, other)).toBe(false);
    expect(await store.releaseHostRecord(lease, holder)).toBe(true);
    expect(await store.releaseHostRecord(lease, holder)).toBe(false);
    expect(await store.leaseHostRecord(lease, other, 1)).toBe(true);
    // A holder that never releases (its process died) holds it only until it runs out.
    realClock.advance(1_100);
    if (factory.name.includes("redis")) await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await store.leaseHostRecord(lease, holder, 60)).toBe(true);
    expect(await store.getHostRecord(record)).toEqual({ turns: [1] });
    expect((await thrown(() => store.leaseHostRecord(lease, "", 60))).code).toBe("invalid_input");
    expect((await thrown(() => store.leaseHostRecord(lease, holder, 0))).code).toBe("invalid_input");
  });

  describe("host-record quotas", () => {
    // Redis expires host records on its own clock, so these stores' clocks are the real one.
    const realClock = () => manualClock(Date.now()).now;
    const record = (bytes: number, tag: string) => ({ tag, text: "x".repeat(bytes) });
    const keyOf = (owner: string, id: number | string) => ({
      kind: "agent-conversation",
      owner,
      id: String(id),
    });

    it("keeps one principal within its quota, its own oldest finished records evicted first, another untouched", async () => {
      const store = await open({
        clock: realClock(),
        maxHostRecordsPerPrincipal: 3,
        maxHostRecordBytesPerPrincipal: 10_000,
        maxHostRecordBytes: 40_000,
      });
      await store.putHostRecord(keyOf("bob", "b"), record(1_000, "bob"), 60);
      // A flood: far more records than the quota, in a bounded loop.
      for (let index = 0; index < 40; index++) {
        await store.putHostRecord(keyOf("alice", index), record(1_000, `alice-${index}`), 60);
      }
      const kept: string[] = [];
      for (let index = 0; index < 40; index++) {
        const found = await store.getHostRecord<{ tag: string }>(keyOf("alice", index));
        if (found) kept.push(found.tag);
      }
      expect(kept).toEqual(["alice-37", "alice-38", "alice-39"]);
      expect(await store.getHostRecord(keyOf("bob", "b"))).toMatchObject({ tag: "bob" });
      // By bytes too: one record of 9,000 bytes leaves room for nothing else of hers.
      await store.putHostRecord(keyOf("alice", "big"), record(9_000, "big"), 60);
      expect(await store.getHostRecord(keyOf("alice", 39))).toBeNull();
      expect(await store.getHostRecord(keyOf("alice", "big"))).toMatchObject({ tag: "big" });
      // Rewriting a record replaces it: it does not count twice.
      await store.putHostRecord(keyOf("alice", "big"), record(9_000, "big-2"), 60);
      expect(await store.getHostRecord(keyOf("alice", "big"))).toMatchObject({ tag: "big-2" });
    });

    it("never evicts a record in use: past the quota with only those, the principal is refused with its own use", async () => {
      const store = await open({
        clock: realClock(),
        maxHostRecordsPerPrincipal: 2,
        maxHostRecordBytesPerPrincipal: 10_000,
        maxHostRecordBytes: 40_000,
      });
      await store.putHostRecord(keyOf("bob", "b"), record(100, "bob"), 60);
      await store.putHostRecord(keyOf("alice", 1), record(100, "waiting-1"), 60, { inUse: true });
      await store.putHostRecord(keyOf("alice", 2), record(100, "waiting-2"), 60, { inUse: true });
      const refused = await thrown(() => store.putHostRecord(keyOf("alice", 3), record(100, "x"), 60));
      expect(refused.code).toBe("snapshot_limit_exceeded");
      expect(refused.message).toMatch(/this principal's quota of 2 records and 10000 bytes/);
      expect(refused.message).toMatch(/it holds 2 records of \d+ bytes/);
      expect(refused.message).not.toMatch(/bob/);
      // Nothing was evicted by the refusal; a finished record of hers makes room for itself again.
      expect(await store.getHostRecord(keyOf("alice", 1))).toMatchObject({ tag: "waiting-1" });
      await store.putHostRecord(keyOf("alice", 2), record(100, "done-2"), 60);
      await store.putHostRecord(keyOf("alice", 3), record(100, "new-3"), 60);
      expect(await store.getHostRecord(keyOf("alice", 2))).toBeNull();
      expect(await store.getHostRecord(keyOf("alice", 1))).toMatchObject({ tag: "waiting-1" });
      // Another principal is not hurt by any of it.
      await store.putHostRecord(keyOf("bob", "b2"), record(100, "bob-2"), 60);
      expect(await store.getHostRecord(keyOf("bob", "b"))).toMatchObject({ tag: "bob" });
      // A record larger than the quota itself is refused outright.
      const huge = await thrown(() => store.putHostRecord(keyOf("carol", 1), record(11_000, "huge"), 60));
      expect(huge.message).toMatch(/this principal's quota/);
      // A deleted record frees its place.
      expect(await store.deleteHostRecord(keyOf("alice", 3))).toBe(true);
      await store.putHostRecord(keyOf("alice", 4), record(100, "new-4"), 60);
      expect(await store.getHostRecord(keyOf("alice", 1))).toMatchObject({ tag: "waiting-1" });
    });

    it("keeps every principal together within the store's budget, oldest finished records first", async () => {
      const store = await open({
        clock: realClock(),
        maxHostRecordsPerPrincipal: 100,
        maxHostRecordBytesPerPrincipal: 5_000,
        maxHostRecordBytes: 5_000,
      });
      const size = 1_200; // about 1,220 bytes as JSON: four fit in 5,000.
      for (let index = 0; index < 3; index++) {
        await store.putHostRecord(keyOf("alice", index), record(size, `alice-${index}`), 60);
      }
      for (let index = 0; index < 3; index++) {
        await store.putHostRecord(keyOf("bob", index), record(size, `bob-${index}`), 60);
      }
      const present = async () => {
        const tags: string[] = [];
        for (const owner of ["alice", "bob", "carol"]) {
          for (let index = 0; index < 3; index++) {
            const found = await store.getHostRecord<{ tag: string }>(keyOf(owner, index));
            if (found) tags.push(found.tag);
          }
        }
        return tags;
      };
      // Six records of about 1,220 bytes do not fit 5,000: the two oldest (alice's) made room.
      expect(await present()).toEqual(["alice-2", "bob-0", "bob-1", "bob-2"]);
      // Records in use fill the budget: the next put is refused without naming anyone else's use.
      const busy = await open({
        clock: realClock(),
        maxHostRecordsPerPrincipal: 100,
        maxHostRecordBytesPerPrincipal: 3_000,
        maxHostRecordBytes: 3_000,
      });
      await busy.putHostRecord(keyOf("alice", 0), record(size, "a"), 60, { inUse: true });
      await busy.putHostRecord(keyOf("bob", 0), record(size, "b"), 60, { inUse: true });
      const refused = await thrown(() => busy.putHostRecord(keyOf("carol", 0), record(size, "c"), 60));
      expect(refused.code).toBe("snapshot_limit_exceeded");
      expect(refused.message).toMatch(/the store's budget for host records of 3000 bytes/);
      expect(refused.message).not.toMatch(/alice|bob|1\d{3} bytes of/);
    });

    it("leases count for no quota and are never evicted", async () => {
      const store = await open({
        clock: realClock(),
        maxHostRecordsPerPrincipal: 1,
        maxHostRecordBytesPerPrincipal: 5_000,
        maxHostRecordBytes: 5_000,
      });
      const lease = { kind: "agent-conversation-taken", owner: "alice", id: "c" };
      expect(await store.leaseHostRecord(lease, "holder-1", 60)).toBe(true);
      for (let index = 0; index < 5; index++) {
        await store.putHostRecord(keyOf("alice", index), record(1_000, `alice-${index}`), 60);
      }
      expect(await store.leaseHostRecord(lease, "holder-2", 60)).toBe(false);
      expect(await store.getHostRecord(keyOf("alice", 4))).toMatchObject({ tag: "alice-4" });
    });
  });

  it("refuses every operation after close", async () => {
    const store = await open();
    const { runId } = await store.suspend(suspendInput());
    await store.close();
    await store.close();
    const error = await thrown(() => store.claim(runId, scopeFor()));
    expect(error.code).toBe("runtime_unavailable");
    expect(error.message).toContain("after close");
  });
});

describe("memory backend shutdown", () => {
  it("drops every run on close and reports each as deleted", async () => {
    const events: SnapshotStoreEvent[] = [];
    const store = await openSnapshotStore({ onEvent: (event) => events.push(event), sweepIntervalMs: 0 });
    const first = await store.suspend(suspendInput());
    const second = await store.suspend(suspendInput());
    await store.close();
    expect(events.filter((event) => event.event === "deleted")).toEqual([
      expect.objectContaining({ runId: first.runId, reason: "shutdown" }),
      expect.objectContaining({ runId: second.runId, reason: "shutdown" }),
    ]);
    expect(store.backend.durable).toBe(false);
  });
});
