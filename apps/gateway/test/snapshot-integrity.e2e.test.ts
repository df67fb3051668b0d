import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { APP_DIR, baseConfig, callCodeMode, connectStdio, makeSetup } from "./harness.js";

const SLOW_SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");

/**
 * What someone who can write the SQLite file (but not the key beside it) can do: take a waiting run's
 * snapshot, change it, and put a fresh SHA-256 of the signed part (bytes 40..end) back in its header
 * (bytes 8..40), which is exactly what an unkeyed integrity check accepts.
 */
function forgeSnapshots(databasePath: string, edit: (state: Record<string, unknown>) => void): number {
  const db = new Database(databasePath);
  try {
    const rows = db
      .prepare<[], { run_id: string; snapshot: Buffer }>("SELECT run_id, snapshot FROM runs WHERE live = 1")
      .all();
    for (const row of rows) {
      const bytes = Buffer.from(row.snapshot);
      const stateLength = bytes.readUInt32LE(40);
      const state = JSON.parse(bytes.subarray(44, 44 + stateLength).toString("utf8")) as Record<
        string,
        unknown
      >;
      edit(state);
      const stateBytes = Buffer.from(JSON.stringify(state), "utf8");
      const forged = Buffer.concat([
        bytes.subarray(0, 40),
        Buffer.alloc(4),
        stateBytes,
        bytes.subarray(44 + stateLength),
      ]);
      forged.writeUInt32LE(stateBytes.length, 40);
      createHash("sha256").update(forged.subarray(40)).digest().copy(forged, 8);
      db.prepare("UPDATE runs SET snapshot = ? WHERE run_id = ?").run(forged, row.run_id);
    }
    return rows.length;
  } finally {
    db.close();
  }
}

describe("snapshot integrity on the SQLite store", () => {
  it("signs with a generated owner-only key and refuses a snapshot edited and re-hashed in the file", async () => {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 10_000 } },
        snapshotStore: { kind: "sqlite", path: "./runs.db" },
        mcpServers: {},
      }),
    );
    const before = await connectStdio(setup.configPath, { args: ["--session", "forge-test"] });
    const waiting = await callCodeMode(before.client, "exec", {
      code: `await yield_control("pause"); return "the real value";`,
    });
    expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
    await before.close();

    // The key was generated on first start, beside the store, readable by its owner only.
    const keyFile = join(setup.dir, "runs.db.key");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFile, "utf8").trim().length).toBeGreaterThanOrEqual(32);

    // An identical re-hash is the smallest forgery: the content is the real one, only the seal is not.
    expect(forgeSnapshots(join(setup.dir, "runs.db"), (state) => Object.assign(state, {}))).toBe(1);

    const after = await connectStdio(setup.configPath, { args: ["--session", "forge-test"] });
    try {
      const resumed = await callCodeMode(after.client, "wait", { runId: waiting.runId });
      expect(resumed, JSON.stringify(resumed)).toMatchObject({
        status: "failed",
        code: "snapshot_restore_failed",
      });
      expect(resumed.error).toMatch(/integrity|signature|secret/i);
    } finally {
      await after.close();
    }
  }, 60_000);

  it("refuses a run whose recorded tool result was edited in the file", async () => {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 10_000 } },
        snapshotStore: { kind: "sqlite", path: "./runs.db" },
        mcpServers: {
          slow: {
            command: process.execPath,
            args: [SLOW_SERVER],
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a config file's ${ENV} reference
            env: { CALL_LOG: "${CODECELL_CONFIG_DIR}/calls.log" },
          },
        },
      }),
    );
    const callLog = join(setup.dir, "calls.log");
    const before = await connectStdio(setup.configPath, { args: ["--session", "outcome-forge"] });
    // The call is still running when the cell yields: its result is recorded in the store later, as a
    // pending call's outcome beside the snapshot, and the resumed cell trusts it.
    const waiting = await callCodeMode(before.client, "exec", {
      code: `const answer = MCP.slow.wait_long({ seconds: 0.2 }); await yield_control("pause"); return await answer;`,
    });
    expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
    for (
      let wait = 0;
      wait < 300 && !(existsSync(callLog) && readFileSync(callLog, "utf8").includes("finished"));
      wait++
    )
      await new Promise((resolve) => setTimeout(resolve, 50));
    // Time to record the outcome after the downstream server answered.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await before.close();

    const db = new Database(join(setup.dir, "runs.db"));
    try {
      const edited = db
        .prepare(
          "UPDATE pending_calls SET outcome_json = replace(outcome_json, 'finished', 'forged') WHERE outcome_json LIKE '%finished%'",
        )
        .run().changes;
      expect(edited, "the slow call's real result was recorded in the file").toBe(1);
    } finally {
      db.close();
    }

    const after = await connectStdio(setup.configPath, { args: ["--session", "outcome-forge"] });
    try {
      const resumed = await callCodeMode(after.client, "wait", { runId: waiting.runId });
      expect(resumed, JSON.stringify(resumed)).toMatchObject({
        status: "failed",
        code: "snapshot_restore_failed",
      });
      expect(resumed.error).toMatch(/integrity check/i);
      expect(JSON.stringify(resumed)).not.toContain("forged");
    } finally {
      await after.close();
    }
  }, 90_000);

  it("refuses a configured secret shorter than 32 bytes", async () => {
    const setup = makeSetup(
      baseConfig({ snapshotStore: { kind: "sqlite", path: "./runs.db", secret: "short" }, mcpServers: {} }),
    );
    const { spawnSync } = await import("node:child_process");
    const { CLI } = await import("./harness.js");
    const checked = spawnSync(process.execPath, [CLI, "check", "--config", setup.configPath], {
      encoding: "utf8",
    });
    expect(checked.status).not.toBe(0);
    expect(checked.stderr + checked.stdout).toMatch(
      /snapshotStore\.secret: has 5 bytes; at least 32 are needed/,
    );
  });
});
