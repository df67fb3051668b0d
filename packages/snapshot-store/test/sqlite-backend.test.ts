import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type BetterSqlite3 from "better-sqlite3";
import { build } from "esbuild";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openSnapshotStore, type SnapshotStore } from "../src/snapshot-store.js";
import { SqliteSnapshotBackend } from "../src/sqlite-backend.js";
import type { RunScope } from "../src/types.js";
import { manualClock, patternBytes, scopeFor, suspendInput, TEST_SECRET } from "./support/fixtures.js";

const packageDirectory = dirname(dirname(fileURLToPath(import.meta.url)));
const Database = createRequire(import.meta.url)("better-sqlite3") as typeof BetterSqlite3;

let directory: string;
const stores: SnapshotStore[] = [];

function databasePath(): string {
  return join(directory, "snapshots.db");
}

async function openFile(clock = manualClock(), secret?: string): Promise<SnapshotStore> {
  const store = await openSnapshotStore({
    backend: new SqliteSnapshotBackend({ path: databasePath(), ...(secret ? { secret } : {}) }),
    clock: clock.now,
    sweepIntervalMs: 0,
  });
  stores.push(store);
  return store;
}

describe("SQLite backend: durability", () => {
  beforeAll(() => {
    directory = mkdtempSync(join(tmpdir(), "codecell-sqlite-"));
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    rmSync(databasePath(), { force: true });
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it("leaves a client tool's call pending across a restart: the client answers it, not the dead process", async () => {
    const clock = manualClock();
    const before = await openFile(clock);
    const { runId } = await before.suspend(
      suspendInput({
        pendingCalls: [
          { callId: "host-call", toolId: "core:host:read_file", startedAt: "2026-01-01T00:00:00.000Z" },
          { callId: "client-call", toolId: "client:app:select_file", startedAt: "2026-01-01T00:00:00.000Z" },
        ],
      }),
    );
    await before.close();
    const after = await openFile(clock);
    expect(after.recovery.interruptedCalls).toBe(1);
    expect(await after.settleCall(runId, "client-call", { ok: true, value: "a.md" })).toBe("recorded");
    const claim = await after.claim(runId, scopeFor());
    expect(claim.pendingCalls.map((call) => [call.callId, call.outcome?.ok])).toEqual([
      ["host-call", false],
      ["client-call", true],
    ]);
  });

  it("keeps waiting runs across a restart; settled runs resume as they were, in-flight calls fail", async () => {
    const clock = manualClock();
    const before = await openFile(clock);
    const settled = await before.suspend(suspendInput({ hostState: { marker: "settled" } }));
    await before.settleCall(settled.runId, "call-1", { ok: true, value: "one" });
    await before.settleCall(settled.runId, "call-2", { ok: true, value: "two" });
    const inFlight = await before.suspend(suspendInput({ hostState: { marker: "in flight" } }));
    await before.settleCall(inFlight.runId, "call-1", { ok: true, value: "one" });
    const resuming = await before.suspend(suspendInput({ pendingCalls: [] }));
    await before.claim(resuming.runId, scopeFor());
    await before.close();

    const after = await openFile(clock);
    expect(after.recovery).toEqual({ liveRuns: 3, requeuedRuns: 1, interruptedCalls: 1 });

    const first = await after.claim(settled.runId, scopeFor());
    expect(first.hostState).toEqual({ marker: "settled" });
    expect(first.pendingCalls.map((call) => call.outcome)).toEqual([
      { ok: true, value: "one" },
      { ok: true, value: "two" },
    ]);
    const second = await after.claim(inFlight.runId, scopeFor());
    expect(second.pendingCalls[0]?.outcome).toEqual({ ok: true, value: "one" });
    expect(second.pendingCalls[1]?.outcome).toMatchObject({
      ok: false,
      error: { name: "CodeModeError", code: "nested_tool_failed" },
    });
    expect(
      second.pendingCalls[1]?.outcome?.ok === false && second.pendingCalls[1].outcome.error.message,
    ).toContain("interrupted by restart");
    // The run claimed when the process stopped is waiting again, from its last stored snapshot.
    const third = await after.claim(resuming.runId, scopeFor());
    expect(third.resumeCount).toBe(2);
    // Scope checks, expiry and tombstones hold across the restart too.
    await expect(after.claim(settled.runId, scopeFor())).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("remembers aborted and expired runs across a restart", async () => {
    const clock = manualClock();
    const before = await openFile(clock);
    const aborted = await before.suspend(suspendInput());
    const expiring = await before.suspend(suspendInput({ ttlSeconds: 5 }));
    await before.abort({ sessionId: "session-1", runId: aborted.runId });
    await before.close();
    clock.advance(5_000);
    const after = await openFile(clock);
    await expect(after.claim(aborted.runId, scopeFor())).rejects.toMatchObject({ code: "aborted" });
    await expect(after.claim(expiring.runId, scopeFor())).rejects.toMatchObject({ code: "snapshot_expired" });
  });

  it("is one file at rest, and a second opener of a file in use is refused with a clear error", async () => {
    const store = await openFile();
    await store.suspend(suspendInput({ snapshot: patternBytes(150_000, 5) }));
    const error = (() => {
      try {
        const intruder = new SqliteSnapshotBackend({ path: databasePath(), busyTimeoutMs: 0 });
        void intruder.close();
        return undefined;
      } catch (caught) {
        return caught as { code?: string; message: string };
      }
    })();
    expect(error?.code).toBe("runtime_unavailable");
    expect(error?.message).toContain("no other process has the store open");
    await store.close();
    expect(statSync(databasePath()).size).toBeGreaterThan(150_000);
    const wal = `${databasePath()}-wal`;
    expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0);
  });

  it("refuses a file it cannot open with runtime_unavailable naming the path", () => {
    const path = join(directory, "missing", "nested", "snapshots.db");
    expect(() => new SqliteSnapshotBackend({ path })).toThrow(
      expect.objectContaining({ code: "runtime_unavailable" }),
    );
    expect(() => new SqliteSnapshotBackend({ path: "" })).toThrow(
      expect.objectContaining({ code: "invalid_config" }),
    );
  });
});

/** Change the closed store file the way someone who can write it (but not read the key) would. */
function editFile(sql: string, ...parameters: unknown[]): number {
  const db = new Database(databasePath());
  try {
    return db.prepare(sql).run(...parameters).changes;
  } finally {
    db.close();
  }
}

describe("SQLite backend: integrity of what a resume trusts", () => {
  beforeAll(() => {
    directory = mkdtempSync(join(tmpdir(), "codecell-sqlite-mac-"));
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    rmSync(databasePath(), { force: true });
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  /** A waiting run with one recorded outcome and one call still pending, in a closed file. */
  async function storedRun(clock = manualClock()) {
    const store = await openFile(clock, TEST_SECRET);
    const { runId } = await store.suspend(suspendInput({ hostState: { requests: 2 } }));
    await store.settleCall(runId, "call-1", { ok: true, value: { balance: 10 } });
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    return runId;
  }

  async function expectRefused(runId: string, clock = manualClock(), caller: Partial<RunScope> = {}) {
    const store = await openFile(clock, TEST_SECRET);
    const refused = await store.claim(runId, scopeFor(caller)).then(
      () => null,
      (error: { code?: string; message: string }) => error,
    );
    expect(refused?.code).toBe("snapshot_restore_failed");
    expect(refused?.message).toMatch(/integrity check/);
    // The run is ended: it cannot be tried again with the forged row.
    await expect(store.claim(runId, scopeFor())).rejects.not.toMatchObject({
      code: "snapshot_restore_failed",
    });
    expect((await store.stats()).live).toBe(0);
  }

  it("resumes an untouched signed run, outcomes included, across restarts and resuspends", async () => {
    const clock = manualClock();
    const runId = await storedRun(clock);
    const store = await openFile(clock, TEST_SECRET);
    const claim = await store.claim(runId, scopeFor());
    expect(claim.pendingCalls[0]?.outcome).toEqual({ ok: true, value: { balance: 10 } });
    expect(claim.hostState).toEqual({ requests: 2 });
    // Resuspended without the outcome it already has: the store carries it over, still verifiable.
    await store.resuspend(claim, {
      snapshot: patternBytes(2048, 8),
      pendingCalls: claim.pendingCalls.map(({ callId, toolId, startedAt }) => ({
        callId,
        toolId,
        startedAt,
      })),
      output: [],
      telemetry: claim.telemetry,
    });
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    // call-2 was in flight when the store closed: recovery records it as interrupted, signed too.
    const again = await openFile(clock, TEST_SECRET);
    const second = await again.claim(runId, scopeFor());
    expect(second.pendingCalls[0]?.outcome).toEqual({ ok: true, value: { balance: 10 } });
    expect(second.pendingCalls[1]?.outcome).toMatchObject({
      ok: false,
      error: { code: "nested_tool_failed" },
    });
  });

  it("refuses a run whose recorded outcome was edited in the file", async () => {
    const runId = await storedRun();
    const forged = JSON.stringify({ ok: true, value: { balance: 1_000_000 } });
    expect(
      editFile(
        "UPDATE pending_calls SET outcome_json = ? WHERE run_id = ? AND call_id = 'call-1'",
        forged,
        runId,
      ),
    ).toBe(1);
    await expectRefused(runId);
  });

  it("refuses an outcome written into a call that had none", async () => {
    const runId = await storedRun();
    const forged = JSON.stringify({ ok: true, value: "approved" });
    expect(
      editFile(
        "UPDATE pending_calls SET outcome_json = ?, settled_at = '2026-01-01T00:00:01.000Z' WHERE run_id = ? AND call_id = 'call-2'",
        forged,
        runId,
      ),
    ).toBe(1);
    await expectRefused(runId);
  });

  it("refuses an outcome copied from another call, with its MAC", async () => {
    const runId = await storedRun();
    expect(
      editFile(
        `UPDATE pending_calls SET (outcome_json, settled_at, outcome_mac) =
           (SELECT outcome_json, settled_at, outcome_mac FROM pending_calls WHERE run_id = ? AND call_id = 'call-1')
         WHERE run_id = ? AND call_id = 'call-2'`,
        runId,
        runId,
      ),
    ).toBe(1);
    await expectRefused(runId);
  });

  const rowEdits = [
    { part: "host state", sql: `UPDATE runs SET host_state_json = '{"requests":99}' WHERE run_id = ?` },
    { part: "output", sql: `UPDATE runs SET output_json = '[]' WHERE run_id = ?` },
    {
      part: "telemetry",
      sql: `UPDATE runs SET telemetry_json = replace(telemetry_json, '1', '2') WHERE run_id = ?`,
    },
    { part: "snapshot", sql: "UPDATE runs SET snapshot = zeroblob(length(snapshot)) WHERE run_id = ?" },
    {
      part: "scope (the run moved to another session)",
      sql: "UPDATE runs SET session_id = 'session-2' WHERE run_id = ?",
      caller: { sessionId: "session-2" },
    },
    { part: "pending call list", sql: "DELETE FROM pending_calls WHERE run_id = ? AND call_id = 'call-2'" },
    { part: "row MAC (removed)", sql: "UPDATE runs SET mac = NULL WHERE run_id = ?" },
    { part: "outcome MAC (removed)", sql: "UPDATE pending_calls SET outcome_mac = NULL WHERE run_id = ?" },
  ];
  it.each(rowEdits)("refuses a run whose $part was edited in the file", async (edit) => {
    const runId = await storedRun();
    expect(editFile(edit.sql, runId)).toBeGreaterThan(0);
    await expectRefused(runId, manualClock(), "caller" in edit ? edit.caller : {});
  });

  it("refuses rows signed with another secret", async () => {
    const runId = await storedRun();
    const store = await openFile(manualClock(), `${TEST_SECRET}-but-another-one`);
    await expect(store.claim(runId, scopeFor())).rejects.toMatchObject({ code: "snapshot_restore_failed" });
  });

  it("refuses a run's signed row copied over another run's", async () => {
    const clock = manualClock();
    const store = await openFile(clock, TEST_SECRET);
    const first = await store.suspend(suspendInput());
    const second = await store.suspend(suspendInput());
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    const copied = editFile(
      `UPDATE runs SET (snapshot, output_json, telemetry_json, host_state_json, mac) =
         (SELECT snapshot, output_json, telemetry_json, host_state_json, mac FROM runs WHERE run_id = ?) WHERE run_id = ?`,
      first.runId,
      second.runId,
    );
    expect(copied).toBe(1);
    const reopened = await openFile(clock, TEST_SECRET);
    await expect(reopened.claim(second.runId, scopeFor())).rejects.toMatchObject({
      code: "snapshot_restore_failed",
      message: expect.stringMatching(/integrity check/),
    });
    // The run it was copied from is untouched and resumes.
    expect((await reopened.claim(first.runId, scopeFor())).runId).toBe(first.runId);
  });

  it("refuses a secret shorter than 32 bytes", () => {
    expect(() => new SqliteSnapshotBackend({ path: databasePath(), secret: "short" })).toThrow(
      expect.objectContaining({ code: "invalid_config" }),
    );
  });
});

describe("SQLite backend: signed host records", () => {
  beforeAll(() => {
    directory = mkdtempSync(join(tmpdir(), "codecell-sqlite-host-"));
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    rmSync(databasePath(), { force: true });
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  const transcript = { kind: "agent-conversation", owner: "alice", id: "c-1" };
  const lease = { kind: "agent-conversation-taken", owner: "alice", id: "c-1" };
  const keyText = (key: { kind: string; owner: string; id: string }) =>
    [key.kind, key.owner, key.id].map(encodeURIComponent).join("/");

  /** Writes records with the secret and closes the file, so a test can edit it as an intruder would. */
  async function written(
    clock: ReturnType<typeof manualClock>,
    write: (store: SnapshotStore) => Promise<void>,
  ) {
    const store = await openFile(clock, TEST_SECRET);
    await write(store);
    await store.close();
    stores.splice(stores.indexOf(store), 1);
  }

  async function refusal(action: () => Promise<unknown>) {
    const error = await action().then(
      () => null,
      (caught: { code?: string; message: string }) => caught,
    );
    expect(error?.code).toBe("snapshot_restore_failed");
    expect(error?.message).toMatch(
      /agent-conversation(-taken)? record was refused: it failed the snapshot store's integrity check/,
    );
  }

  it("reads back an untouched record and renews an untouched lease after a reopen", async () => {
    const clock = manualClock();
    await written(clock, async (store) => {
      await store.putHostRecord(transcript, { turns: [1, 2] }, 600);
      expect(await store.leaseHostRecord(lease, "holder-a", 600)).toBe(true);
    });
    const store = await openFile(clock, TEST_SECRET);
    expect(await store.getHostRecord(transcript)).toEqual({ turns: [1, 2] });
    expect(await store.leaseHostRecord(lease, "holder-a", 600)).toBe(true);
    expect(await store.leaseHostRecord(lease, "holder-b", 600)).toBe(false);
  });

  const edits = [
    {
      what: "a value edited in the file",
      sql: `UPDATE host_records SET value_json = replace(value_json, '[1,2]', '[1,2,"injected"]') WHERE key = ?`,
      parameters: [keyText(transcript)],
      read: transcript,
    },
    {
      what: "a record copied from another owner's key",
      sql: "UPDATE host_records SET value_json = (SELECT value_json FROM host_records WHERE key = ?) WHERE key = ?",
      parameters: [keyText({ ...transcript, owner: "bob" }), keyText(transcript)],
      read: transcript,
    },
    {
      what: "a record copied from another kind's key",
      sql: "UPDATE host_records SET value_json = (SELECT value_json FROM host_records WHERE key = ?) WHERE key = ?",
      parameters: [keyText({ ...transcript, kind: "agent-response" }), keyText(transcript)],
      read: transcript,
    },
    {
      what: "a record copied from another id's key",
      sql: "UPDATE host_records SET value_json = (SELECT value_json FROM host_records WHERE key = ?) WHERE key = ?",
      parameters: [keyText({ ...transcript, id: "c-2" }), keyText(transcript)],
      read: transcript,
    },
    {
      what: "an unsigned record written into the file",
      sql: `UPDATE host_records SET value_json = '{"turns":[9]}' WHERE key = ?`,
      parameters: [keyText(transcript)],
      read: transcript,
    },
  ];
  it.each(edits)("refuses $what", async (edit) => {
    const clock = manualClock();
    await written(clock, async (store) => {
      await store.putHostRecord(transcript, { turns: [1, 2] }, 600);
      await store.putHostRecord({ ...transcript, owner: "bob" }, { turns: ["bob"] }, 600);
      await store.putHostRecord({ ...transcript, kind: "agent-response" }, { turns: ["response"] }, 600);
      await store.putHostRecord({ ...transcript, id: "c-2" }, { turns: ["other"] }, 600);
    });
    expect(editFile(edit.sql, ...edit.parameters)).toBe(1);
    const store = await openFile(clock, TEST_SECRET);
    await refusal(() => store.getHostRecord(edit.read));
  });

  it("refuses a lease forged in the file, or copied from another conversation", async () => {
    const clock = manualClock();
    const other = { ...lease, id: "c-2" };
    await written(clock, async (store) => {
      expect(await store.leaseHostRecord(other, "holder-x", 600)).toBe(true);
    });
    editFile(
      "INSERT INTO host_records (key, value_json, expires_at) VALUES (?, 'intruder', ?)",
      keyText(lease),
      clock.now() + 600_000,
    );
    const store = await openFile(clock, TEST_SECRET);
    await refusal(() => store.leaseHostRecord(lease, "holder-a", 600));
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    editFile(
      "UPDATE host_records SET value_json = (SELECT value_json FROM host_records WHERE key = ?) WHERE key = ?",
      keyText(other),
      keyText(lease),
    );
    const again = await openFile(clock, TEST_SECRET);
    await refusal(() => again.leaseHostRecord(lease, "holder-a", 600));
  });

  it("refuses records written with another secret", async () => {
    const clock = manualClock();
    await written(clock, (store) => store.putHostRecord(transcript, { turns: [1] }, 600));
    const store = await openFile(clock, `${TEST_SECRET}-but-another-one`);
    await refusal(() => store.getHostRecord(transcript));
  });
});

type Acknowledgement =
  | { kind: "ready" }
  | { kind: "stored" | "resuspended"; runId: string; step: number; sha: string }
  | { kind: "settled"; runId: string; callId: string; step: number };

describe("SQLite backend: SIGKILL in the middle of writes", () => {
  let crashDirectory: string;
  let writerScript: string;

  beforeAll(async () => {
    crashDirectory = mkdtempSync(join(tmpdir(), "codecell-crash-"));
    // Bundled from the TypeScript source so the child runs the same code as the tests, without a build.
    const artifacts = join(packageDirectory, "test-artifacts");
    mkdirSync(artifacts, { recursive: true });
    writerScript = join(artifacts, `crash-writer-${process.pid}.mjs`);
    await build({
      entryPoints: [join(packageDirectory, "test/support/crash-writer.ts")],
      outfile: writerScript,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      conditions: ["@codecell/source"],
      external: ["better-sqlite3"],
      logLevel: "error",
    });
  });
  afterAll(() => {
    rmSync(crashDirectory, { recursive: true, force: true });
    rmSync(writerScript, { force: true });
  });

  /** Runs the writer until it has acknowledged `writes` writes, then kills it with SIGKILL. */
  async function writeThenKill(path: string, writes: number): Promise<Acknowledgement[]> {
    const child: ChildProcess = spawn(process.execPath, [writerScript, path], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const acknowledged: Acknowledgement[] = [];
    let pending = "";
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on("exit", (_code, signal) => resolve(signal)),
    );
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`writer too slow; stderr: ${stderr}`)), 60_000);
      child.stdout?.on("data", (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split("\n");
        // A line without its newline may have been cut by the kill: it was never acknowledged.
        pending = lines.pop() ?? "";
        for (const line of lines) acknowledged.push(JSON.parse(line) as Acknowledgement);
        if (acknowledged.length > writes && child.exitCode === null && !child.killed) {
          child.kill("SIGKILL");
          clearTimeout(timer);
          resolve();
        }
      });
      child.on("exit", (code) => {
        clearTimeout(timer);
        if (!child.killed) reject(new Error(`writer exited early with ${code}; stderr: ${stderr}`));
      });
    });
    expect(await exited).toBe("SIGKILL");
    return acknowledged;
  }

  /** Reopens the killed writer's file and checks every acknowledged write and every row in it. */
  async function verify(path: string, acknowledged: Acknowledgement[]): Promise<void> {
    expect(existsSync(`${path}-wal`)).toBe(true);
    // Reopen through the store: recovery must run cleanly on the killed writer's file.
    const store = await openSnapshotStore({
      backend: new SqliteSnapshotBackend({ path }),
      sweepIntervalMs: 0,
      maxLiveRuns: 1_000_000,
    });
    stores.push(store);
    const liveRuns = (await store.stats()).live;
    expect(store.recovery.liveRuns).toBe(liveRuns);

    // Every acknowledged write is there, and at least as new as acknowledged.
    const latest = new Map<string, { step: number; sha: string }>();
    for (const line of acknowledged) {
      if (line.kind === "stored" || line.kind === "resuspended")
        latest.set(line.runId, { step: line.step, sha: line.sha });
    }
    expect(liveRuns).toBeGreaterThanOrEqual(latest.size);
    for (const [runId, expected] of latest) {
      const claim = await store.claim(runId, scopeFor());
      const hostState = claim.hostState as { sha: string; step: number };
      const actualSha = createHash("sha256").update(claim.snapshot).digest("hex");
      expect(actualSha).toBe(hostState.sha);
      expect(hostState.step).toBeGreaterThanOrEqual(expected.step);
      if (hostState.step === expected.step) expect(actualSha).toBe(expected.sha);
      for (const line of acknowledged) {
        if (line.kind !== "settled" || line.runId !== runId || hostState.step > line.step) continue;
        expect(claim.pendingCalls.find((call) => call.callId === line.callId)?.outcome).toEqual({
          ok: true,
          value: { step: line.step },
        });
      }
      // Nothing is left unsettled after recovery.
      expect(claim.pendingCalls.every((call) => call.outcome !== undefined)).toBe(true);
      await store.release(claim);
    }
    await store.close();

    // Every row in the file, acknowledged or not, is whole: its snapshot matches the hash beside it.
    const db = new Database(path, { readonly: true });
    try {
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      const rows = db
        .prepare<[], { snapshot: Buffer; host_state_json: string; bytes: number }>(
          "SELECT snapshot, host_state_json, bytes FROM runs WHERE live = 1",
        )
        .all();
      expect(rows.length).toBe(liveRuns);
      for (const row of rows) {
        const hostState = JSON.parse(row.host_state_json) as { sha: string };
        expect(createHash("sha256").update(row.snapshot).digest("hex")).toBe(hostState.sha);
        expect(row.bytes).toBeGreaterThan(row.snapshot.byteLength);
      }
      const orphans = db
        .prepare<[], { n: number }>(
          "SELECT count(*) AS n FROM pending_calls WHERE run_id NOT IN (SELECT run_id FROM runs WHERE live = 1)",
        )
        .get();
      expect(orphans?.n).toBe(0);
    } finally {
      db.close();
    }
  }

  it("reopens with every acknowledged record whole and no torn record, kill after kill", async () => {
    const path = join(crashDirectory, "crash.db");
    const acknowledged: Acknowledgement[] = [];
    // Three writers in turn on one file: each is killed mid-write, and each reopen must be clean.
    for (let round = 0; round < 3; round += 1) {
      const lines = await writeThenKill(path, 300 + round * 37);
      expect(lines.filter((line) => line.kind === "stored").length).toBeGreaterThan(50);
      expect(lines.filter((line) => line.kind === "resuspended").length).toBeGreaterThan(20);
      expect(lines.filter((line) => line.kind === "settled").length).toBeGreaterThan(20);
      acknowledged.push(...lines);
      await verify(path, acknowledged);
    }
    // Three child processes with hundreds of synchronous writes each: generous for a loaded CI machine.
  }, 120_000);
});
