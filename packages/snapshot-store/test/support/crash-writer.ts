// A child process for the crash test: it writes to a SQLite store as fast as it can and prints one
// line per acknowledged write, until the parent kills it with SIGKILL. Every record carries the SHA-256
// of its own snapshot in hostState, so the parent can tell a torn record from a whole one.
import { createHash } from "node:crypto";
import { emptyTelemetry } from "@codecell/contract";
import { openSnapshotStore } from "../../src/snapshot-store.js";
import { SqliteSnapshotBackend } from "../../src/sqlite-backend.js";
import { patternBytes, scopeFor } from "./fixtures.js";

const path = process.argv[2];
if (path === undefined) throw new Error("usage: crash-writer <database file>");

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function acknowledge(line: object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const store = await openSnapshotStore({
  backend: new SqliteSnapshotBackend({ path }),
  maxLiveRuns: 1_000_000,
  maxSnapshotBytes: 8 * 1024 * 1024,
  sweepIntervalMs: 0,
});
acknowledge({ kind: "ready" });

const runs: string[] = [];
// Bounded: the parent kills the child long before this ends.
for (let step = 1; step <= 1_000_000; step += 1) {
  const seed = step;
  const snapshot = patternBytes(20_000 + ((step * 7919) % 180_000), seed);
  const action = step % 4;
  if (action === 3 && runs.length > 0) {
    // Resume an earlier run and suspend it again with a new snapshot.
    const runId = runs[step % runs.length]!;
    const claim = await store.claim(runId, scopeFor());
    await store.resuspend(claim, {
      snapshot,
      pendingCalls: [{ callId: `call-${step}`, toolId: "core__slow", startedAt: new Date().toISOString() }],
      output: [{ type: "text", text: `resumed at step ${step}` }],
      telemetry: emptyTelemetry(),
      hostState: { sha: sha256(snapshot), step },
    });
    acknowledge({ kind: "resuspended", runId, step, sha: sha256(snapshot) });
  } else if (action === 2 && runs.length > 0) {
    const runId = runs[runs.length - 1]!;
    const claim = await store.claim(runId, scopeFor());
    const callId = claim.pendingCalls.find((call) => call.outcome === undefined)?.callId;
    await store.release(claim);
    if (callId !== undefined) {
      const result = await store.settleCall(runId, callId, { ok: true, value: { step } });
      if (result === "recorded") acknowledge({ kind: "settled", runId, callId, step });
    }
  } else {
    const { runId } = await store.suspend({
      scope: scopeFor(),
      snapshot,
      pendingCalls: [
        { callId: `call-${step}`, toolId: "core__slow", startedAt: new Date().toISOString() },
        {
          callId: `done-${step}`,
          toolId: "core__fast",
          startedAt: new Date().toISOString(),
          outcome: { ok: true, value: step },
        },
      ],
      output: [{ type: "text", text: `suspended at step ${step}` }],
      telemetry: emptyTelemetry(),
      hostState: { sha: sha256(snapshot), step },
    });
    runs.push(runId);
    acknowledge({ kind: "stored", runId, step, sha: sha256(snapshot) });
  }
}
