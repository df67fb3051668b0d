import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodeModeError, type HostTool } from "@codecell/contract";
import { type CodeModeEngine, createCodeModeEngine } from "@codecell/engine";
import { openSnapshotStore, type SnapshotStore, SqliteSnapshotBackend } from "@codecell/snapshot-store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentLoop, OpenAiUpstream, snapshotStoreConversations, type TurnMessage } from "../src/index.js";
import { type ScriptedUpstream, startScriptedUpstream } from "../src/testing/scripted-upstream.js";

/** The host's own tool: what an embedding host runs itself. */
const HOST_TOOLS: HostTool[] = [
  {
    name: "weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } } },
    source: "core",
    owner: "host",
  },
];

const lastToolResult = (body: Record<string, unknown>) => {
  const messages = body.messages as Array<Record<string, unknown>>;
  return JSON.parse(String(messages.filter((message) => message.role === "tool").at(-1)?.content));
};

// The loop as another host embeds it: an engine, an upstream and the run's tools; here over a real
// SQLite file, so conversations and runs sit in the store a host would configure.
describe("AgentLoop, embedded", () => {
  let upstream: ScriptedUpstream;
  let store: SnapshotStore;
  let engine: CodeModeEngine;
  let loop: AgentLoop;
  let path: string;

  /** A host process's parts over the SQLite file: opened at start, and again after a "restart". */
  async function open(): Promise<void> {
    store = await openSnapshotStore({ backend: new SqliteSnapshotBackend({ path, secret: "x".repeat(32) }) });
    engine = createCodeModeEngine({
      config: { enabled: true, timeoutMs: 3000 },
      store,
      snapshotSecret: "y".repeat(32),
    });
    loop = new AgentLoop({
      engine,
      upstream: new OpenAiUpstream({ baseUrl: upstream.baseUrl }),
      conversations: snapshotStoreConversations(store),
      hostTools: () => ({
        tools: HOST_TOOLS,
        executor: { callTool: (call) => ({ city: (call.input as { city: string }).city, sky: "clear" }) },
      }),
    });
  }

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    path = join(mkdtempSync(join(tmpdir(), "codecell-agent-")), "runs.db");
    await open();
  });
  afterAll(async () => {
    await engine?.close();
    await store?.close();
    await upstream?.close();
  });

  it("drives a turn through a client tool and records the nested calls under their exec", async () => {
    upstream.script(
      {
        toolCalls: [
          {
            id: "up_exec_1",
            name: "exec",
            arguments: {
              code: 'const w = await tools.weather({ city: "Oslo" }); const ok = await tools.confirm({ text: w.sky }); return { w, ok };',
            },
          },
        ],
      },
      (body) => ({ text: JSON.stringify(lastToolResult(body).value) }),
    );
    const clientTools = [
      {
        name: "confirm",
        description: "Ask the user to confirm.",
        parameters: { type: "object", properties: {} },
      },
    ];
    const messages: TurnMessage[] = [{ role: "user", content: "weather?" }];
    const base = {
      principal: "p1",
      model: "m",
      clientTools,
      params: {},
      signal: new AbortController().signal,
    };
    const first = await loop.drive({ ...base, messages });
    expect(first).toMatchObject({
      kind: "client_tools",
      toolCalls: [{ name: "confirm", arguments: '{"text":"clear"}' }],
    });
    messages.push(
      { role: "assistant", content: first.content, toolCalls: first.toolCalls },
      { role: "tool", toolCallId: first.toolCalls[0]!.id, content: "true" },
    );
    const second = await loop.drive({ ...base, messages });
    expect(second).toMatchObject({ kind: "answer", threadId: first.threadId });
    expect(JSON.parse(second.content!)).toEqual({ w: { city: "Oslo", sky: "clear" }, ok: true });

    const entries = loop.trajectory("p1", first.threadId).entries;
    const exec = entries.find((entry) => entry.kind === "control" && entry.tool === "exec");
    expect(exec).toMatchObject({ toolCallId: "up_exec_1", status: "waiting" });
    const nested = entries.filter((entry) => entry.kind === "nested");
    expect(nested.map((entry) => [entry.tool, entry.parentToolCallId, entry.status])).toEqual([
      ["core:host:weather", "up_exec_1", "completed"],
      // Handed out, then answered by the client's result: it no longer waits.
      ["client:app:confirm", "up_exec_1", "completed"],
    ]);
    expect(nested[1]?.notes?.[0]).toContain("handed out");
    // The resume is a wait under the same model call, with the run's id.
    expect(entries.find((entry) => entry.tool === "wait")).toMatchObject({
      toolCallId: "up_exec_1/resume-1",
      codeModeRunId: exec?.codeModeRunId,
      status: "completed",
    });
    // Another principal's thread of the same id holds nothing.
    expect(loop.trajectory("p2", first.threadId).entries).toEqual([]);
    expect((await store.stats()).live).toBe(0);
  });

  it("passes the model's exec through the host's hooks: seen as code_mode_exec, rewritten, or blocked before it runs", async () => {
    const seen: Array<{ input: unknown; metadata: unknown; run: unknown }> = [];
    const hooked = new AgentLoop({
      engine,
      upstream: new OpenAiUpstream({ baseUrl: upstream.baseUrl }),
      conversations: snapshotStoreConversations(store),
      hostTools: () => ({
        tools: HOST_TOOLS,
        executor: { callTool: () => ({ sky: "clear" }) },
        beforeExec: (input, metadata, run) => {
          seen.push({ input, metadata, run });
          const code = (input as { code: string }).code;
          if (code.includes("BLOCK_ME"))
            throw new CodeModeError("invalid_input", "Blocked by the host's policy.");
          return { ...(input as object), code: code.replace("return 1", "return 2") };
        },
      }),
    });
    upstream.script(
      {
        toolCalls: [
          { id: "up_hook_1", name: "exec", arguments: { code: "return 1", language: "javascript" } },
        ],
      },
      { toolCalls: [{ id: "up_hook_2", name: "exec", arguments: { code: "// BLOCK_ME\nreturn 3" } }] },
      (body) => ({ text: JSON.stringify(lastToolResult(body)) }),
    );
    const first = upstream.bodies.length;
    const answer = await hooked.drive({
      principal: "p-hooks",
      model: "m",
      clientTools: [],
      params: {},
      signal: new AbortController().signal,
      messages: [{ role: "user", content: "run it" }],
    });
    expect(answer.kind).toBe("answer");
    // The rewritten cell ran (2, not 1); the blocked one never did, and the model read why.
    const results = upstream.bodies.slice(first + 1).map((body) => lastToolResult(body));
    expect(results[0]).toMatchObject({ status: "completed", value: 2 });
    expect(results[1]).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(results[1].error).toContain("Blocked by the host's policy.");
    expect(seen.map((event) => event.metadata)).toEqual([
      expect.objectContaining({ toolKind: "code_mode_exec", toolInputKind: "javascript" }),
      expect.objectContaining({ toolKind: "code_mode_exec" }),
    ]);
    expect(seen[0]?.run).toMatchObject({
      agentId: "codecell-agent",
      sessionKey: "principal:p-hooks",
      sessionId: expect.stringMatching(/^agent:p-hooks\//),
    });
  });

  it("resumes a run waiting for a client tool after the host restarts on the same SQLite file", async () => {
    upstream.script(
      {
        toolCalls: [
          { name: "exec", arguments: { code: "return await tools.confirm({ text: 'restart?' })" } },
        ],
      },
      (body) => ({ text: `answer ${JSON.stringify(lastToolResult(body).value)}` }),
    );
    const clientTools = [{ name: "confirm", description: "Ask the user.", parameters: { type: "object" } }];
    const messages: TurnMessage[] = [{ role: "user", content: "survive a restart" }];
    const base = {
      principal: "p1",
      model: "m",
      clientTools,
      params: {},
      signal: new AbortController().signal,
    };
    const first = await loop.drive({ ...base, messages });
    expect(first.kind).toBe("client_tools");
    await engine.close();
    await store.close();
    await open();
    messages.push(
      { role: "assistant", content: first.content, toolCalls: first.toolCalls },
      { role: "tool", toolCallId: first.toolCalls[0]!.id, content: '"yes"' },
    );
    const second = await loop.drive({ ...base, messages });
    expect(second).toMatchObject({ kind: "answer", content: 'answer "yes"' });
  });
});
