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

// The gateway's default store: conversation records sit in its memory, so one principal's flood of
// large conversations must not grow it past the quotas, nor push out another principal's record.
describe("AgentLoop, one principal flooding the conversation records", () => {
  let upstream: ScriptedUpstream;
  let store: SnapshotStore;
  let engine: CodeModeEngine;
  let loop: AgentLoop;
  const perPrincipal = 1024 * 1024;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    store = await openSnapshotStore({
      maxHostRecordsPerPrincipal: 100,
      maxHostRecordBytesPerPrincipal: perPrincipal,
      maxHostRecordBytes: 4 * perPrincipal,
    });
    engine = createCodeModeEngine({ config: { enabled: true }, store });
    loop = new AgentLoop({
      engine,
      upstream: new OpenAiUpstream({ baseUrl: upstream.baseUrl }),
      conversations: snapshotStoreConversations(store),
      hostTools: () => ({ tools: HOST_TOOLS, executor: { callTool: () => ({ sky: "clear" }) } }),
    });
  });
  afterAll(async () => {
    await engine?.close();
    await store?.close();
    await upstream?.close();
  });

  const ask = (principal: string, conversation: string, messages: TurnMessage[]) =>
    loop.drive({
      principal,
      conversation,
      model: "m",
      clientTools: [],
      params: {},
      signal: new AbortController().signal,
      messages,
    });
  const recordOf = (owner: string, conversation: string) =>
    store.getHostRecord({ kind: "agent-conversation", owner, id: `h:${conversation}` });

  it("keeps the flooding principal within its quota while another principal's conversation goes on", async () => {
    upstream.script({ text: "hello calm" });
    const calmFirst: TurnMessage[] = [{ role: "user", content: "hi" }];
    const first = await ask("calm", "calm-1", calmFirst);

    // 40 conversations of about 200 KB each: 8 MB of transcripts asked for, in a bounded loop.
    const big = "x".repeat(200 * 1024);
    for (let index = 0; index < 40; index++) {
      upstream.script({ text: `answer ${index}` });
      await ask("flood", `flood-${index}`, [{ role: "user", content: `${index} ${big}` }]);
    }
    let kept = 0;
    let keptBytes = 0;
    for (let index = 0; index < 40; index++) {
      const record = await recordOf("flood", `flood-${index}`);
      if (record === null) continue;
      kept += 1;
      keptBytes += Buffer.byteLength(JSON.stringify(record));
    }
    // Only its newest records are kept, within its own quota.
    expect(keptBytes).toBeLessThanOrEqual(perPrincipal);
    expect(kept).toBeGreaterThan(0);
    expect(await recordOf("flood", "flood-39")).not.toBeNull();
    expect(await recordOf("flood", "flood-0")).toBeNull();

    // The other principal's record is untouched, and its conversation goes on from it.
    expect(await recordOf("calm", "calm-1")).not.toBeNull();
    upstream.script((body) => ({ text: `seen ${(body.messages as unknown[]).length} messages` }));
    const second = await ask("calm", "calm-1", [
      ...calmFirst,
      { role: "assistant", content: first.content },
      { role: "user", content: "again" },
    ]);
    expect(second).toMatchObject({ kind: "answer", threadId: first.threadId });
  });
});
