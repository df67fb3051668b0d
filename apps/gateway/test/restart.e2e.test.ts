import { describe, expect, it } from "vitest";
import { baseConfig, callCodeMode, connectStdio, makeSetup } from "./harness.js";

describe("a restart with the SQLite snapshot store", () => {
  it("resumes a waiting run in a new gateway process", async () => {
    const setup = makeSetup(
      baseConfig({ snapshotStore: { kind: "sqlite", path: "./runs.db" }, mcpServers: {} }),
    );
    const before = await connectStdio(setup.configPath, { args: ["--session", "restart-test"] });
    const waiting = await callCodeMode(before.client, "exec", {
      code: `text("before the restart"); const note = await Notes.add({ title: "kept", body: "x" });
             const reason = await yield_control("pause here"); return { note: note.id, after: "resumed" };`,
    });
    expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
    expect(waiting.reason).toBe("yield");
    await before.close();

    const after = await connectStdio(setup.configPath, { args: ["--session", "restart-test"] });
    try {
      const resumed = await callCodeMode(after.client, "wait", { runId: waiting.runId });
      expect(resumed, JSON.stringify(resumed)).toMatchObject({
        status: "completed",
        value: { note: "note-3", after: "resumed" },
      });
    } finally {
      await after.close();
    }

    // The same database does not make runs shared: another stdio session id cannot claim them, and a
    // finished run is not resumed twice.
    const owner = await connectStdio(setup.configPath, { args: ["--session", "restart-test"] });
    const second = await callCodeMode(owner.client, "exec", { code: `await yield_control("x"); return 2;` });
    expect(second.status).toBe("waiting");
    const twice = await callCodeMode(owner.client, "wait", { runId: waiting.runId });
    expect(twice.status).toBe("failed");
    await owner.close();
    const other = await connectStdio(setup.configPath, { args: ["--session", "someone-else"] });
    try {
      const refused = await callCodeMode(other.client, "wait", { runId: second.runId });
      expect(refused).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(refused.error).toMatch(/unknown runId/i);
    } finally {
      await other.close();
    }
  });

  it("loses waiting runs on restart with the memory store, with a clear error", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const before = await connectStdio(setup.configPath);
    const waiting = await callCodeMode(before.client, "exec", {
      code: `await yield_control("x"); return 1;`,
    });
    expect(waiting.status).toBe("waiting");
    await before.close();
    const after = await connectStdio(setup.configPath);
    try {
      const lost = await callCodeMode(after.client, "wait", { runId: waiting.runId });
      expect(lost).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(lost.error).toMatch(/unknown runId/i);
    } finally {
      await after.close();
    }
  });
});
