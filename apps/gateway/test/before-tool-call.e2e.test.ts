import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../src/config/load-config.js";
import { Gateway } from "../src/gateway.js";
import type { ApprovalClient } from "../src/mcp/approvals.js";
import { APP_DIR, makeSetup } from "./harness.js";

type SeenEvent = {
  toolId: string;
  toolName: string;
  toolKind?: string;
  toolInputKind?: string;
  input: { path?: string };
  via: string;
  sessionId: string;
  run: { sessionId: string; runId: string; codeModeRunId?: string; parentToolCallId?: string };
};

// Spec, "Nested tool execution": nested execution keeps "plugin before_tool_call hooks", and "Why":
// "nested tool calls still run through policy, approvals, hooks, session context and audit paths".
describe("plugins' before_tool_call hooks on nested calls", () => {
  let gateway: Gateway;
  const asked: string[] = [];
  const approvals: ApprovalClient = {
    canElicit: () => true,
    askApproval: async (message) => {
      asked.push(message);
      return true;
    },
  };
  beforeAll(async () => {
    const setup = makeSetup({
      tools: { codeMode: { enabled: true, timeoutMs: 30_000 }, approval: ["core:*:write_file"] },
      workspace: "./workspace",
      plugins: [join(APP_DIR, "test", "fixtures", "hook-plugin.mjs")],
    });
    const loaded = loadGatewayConfig(setup.configPath);
    if (!loaded.config) throw new Error(JSON.stringify(loaded.problems));
    gateway = await Gateway.start(loaded.config, { connectMcp: false, log: () => {} });
  });
  afterAll(async () => {
    await gateway?.close();
  });
  const seen = () => (globalThis as { codecellGuardSeen?: SeenEvent[] }).codecellGuardSeen ?? [];

  it("sees every nested call with its run, blocks with a reason the cell gets, and rewrites input", async () => {
    const session = gateway.openSession("hooks-1", approvals);
    const result = await session.exec({
      code: `
        const readme = await tools.read_file({ path: "alias.md" });
        let blocked;
        try { await tools.write_file({ path: "forbidden.txt", content: "x" }); }
        catch (error) { blocked = { code: error.code, message: error.message }; }
        const written = await tools.write_file({ path: "allowed.txt", content: "ok" });
        return { readPath: readme.path, blocked, written: written.path };`,
    });
    expect(result).toMatchObject({
      status: "completed",
      value: {
        readPath: "README.md",
        blocked: { code: "nested_tool_failed" },
        written: "allowed.txt",
      },
    });
    const value = (result as { value: { blocked: { message: string } } }).value;
    expect(value.blocked.message).toContain(
      'Blocked by plugin "guard": writes to forbidden.txt are not allowed here',
    );

    // The hook saw all three calls, with the input as the cell sent it, the session and the run.
    const events = seen().filter((event) => event.sessionId === "hooks-1" && event.toolKind === undefined);
    expect(events.map((event) => [event.toolId, event.input.path, event.via])).toEqual([
      ["core:codecell:read_file", "alias.md", "tools.call"],
      ["core:codecell:write_file", "forbidden.txt", "tools.call"],
      ["core:codecell:write_file", "allowed.txt", "tools.call"],
    ]);
    const runIds = new Set(events.map((event) => event.run.codeModeRunId));
    expect(runIds.size).toBe(1);
    expect(events[0]!.run.sessionId).toBe("local/hooks-1");
    expect(events[0]!.run.parentToolCallId).toMatch(/^hooks-1\//);

    // Order: hooks, then approval. The blocked write was never put to the user; the allowed one was.
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("allowed.txt");

    // Both decisions are on the trajectory, under the same run.
    const { entries } = session.trajectory();
    const nested = entries.filter((entry) => entry.kind === "nested");
    expect(nested.map((entry) => [entry.tool, entry.status, entry.notes ?? []])).toEqual([
      [
        "core:codecell:read_file",
        "completed",
        ['input rewritten by the before_tool_call hook of plugin "guard"'],
      ],
      [
        "core:codecell:write_file",
        "failed",
        [
          'blocked by the before_tool_call hook of plugin "guard": writes to forbidden.txt are not allowed here',
        ],
      ],
      ["core:codecell:write_file", "completed", ["approved by the user"]],
    ]);
    expect(new Set(nested.map((entry) => entry.codeModeRunId))).toEqual(runIds);
    session.end();
  });

  // Spec, "exec": "Outer code-mode exec hook events include toolKind: "code_mode_exec" and include
  // toolInputKind ... so policies can distinguish code-mode cells from shell-style exec calls that share
  // the same tool name."
  it("sees the model's own exec calls, marked code_mode_exec with their language, besides the nested calls", async () => {
    const session = gateway.openSession("hooks-2", approvals);
    const plain = await session.exec({ code: 'return (await tools.read_file({ path: "README.md" })).path;' });
    const typed = await session.exec({ code: "const n: number = 2;\nreturn n;", language: "typescript" });
    expect(plain).toMatchObject({ status: "completed", value: "README.md" });
    expect(typed).toMatchObject({ status: "completed", value: 2 });
    const events = seen().filter((event) => event.sessionId === "hooks-2");
    expect(events.map((event) => [event.toolName, event.toolKind, event.toolInputKind])).toEqual([
      ["exec", "code_mode_exec", "javascript"],
      ["read_file", undefined, undefined],
      ["exec", "code_mode_exec", "typescript"],
    ]);
    expect(events[0]).toMatchObject({
      toolId: "exec",
      source: "code_mode",
      via: "direct",
      input: { code: expect.stringContaining("tools.read_file") },
      run: { sessionId: "local/hooks-2" },
    });
    session.end();
  });

  it("blocks an exec before anything runs, with the plugin's reason, and runs a rewritten one", async () => {
    const session = gateway.openSession("hooks-3", approvals);
    const blocked = await session.exec({
      code: '// BLOCK_ME\nawait tools.write_file({ path: "never.txt", content: "x" }); return 1;',
    });
    expect(blocked).toMatchObject({ status: "failed", code: "invalid_input" });
    expect((blocked as { error: string }).error).toContain(
      'Blocked by plugin "guard": cells that say BLOCK_ME are not allowed',
    );
    expect(blocked.telemetry.nested.calls).toBe(0);
    const rewritten = await session.exec({ code: "// REWRITE_ME\nreturn 1;" });
    expect(rewritten).toMatchObject({ status: "completed", value: "rewritten" });
    // Nothing of the blocked cell ran: its write never reached the hook.
    expect(seen().filter((event) => event.sessionId === "hooks-3" && event.toolKind === undefined)).toEqual(
      [],
    );
    session.end();
  });
});
