import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  baseConfig,
  type Connected,
  connectHttp,
  connectStdio,
  everythingBin,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
} from "./harness.js";
import { connectModernHttp, connectModernStdio } from "./support/modern-client.js";

// One gateway speaks both protocol eras on the same /mcp and over stdio: a 2026-07-28 client (SDK v2,
// negotiating) gets server/discover and stateless calls whose runs belong to its principal; a client
// of the session era (SDK 1.x) keeps initialize and sessions, where a run belongs to the session.

const ALICE = "alice-token-0123456789abcdef";
const BOB = "bob-token-0123456789abcdef01";
const YIELDING = `await yield_control("let the client come back"); return "resumed";`;
/** A cell with a side effect before a call that needs approval: a second run of it would add a second note. */
const tagged = (tag: string) => `
  await tools.notes_add({ title: "before", body: "once", tags: ["${tag}"] });
  let written;
  try { written = await tools.write_file({ path: "${tag}.txt", content: "yes" }); } catch (e) { written = e.message; }
  const notes = await tools.notes_list({ tag: "${tag}" });
  return { written, notes: notes.length };`;

type Structured = { status: string; runId?: string; value?: unknown; error?: string; code?: string };
/** Any client of either SDK: both take `callTool({ name, arguments })`. */
type AnyClient = { callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown> };
async function call(client: AnyClient, name: string, args: Record<string, unknown>) {
  const result = (await client.callTool({ name, arguments: args })) as { structuredContent?: unknown };
  return result.structuredContent as Structured;
}

function eraConfig() {
  return makeSetup(
    baseConfig({
      tools: { codeMode: { enabled: true, timeoutMs: 30_000 }, approval: ["core:codecell:write_file"] },
      mcpServers: { everything: { command: process.execPath, args: [everythingBin(), "stdio"] } },
      http: {
        tokens: [
          { name: "alice", token: ALICE },
          { name: "bob", token: BOB },
        ],
      },
    }),
  );
}

describe("both protocol eras over HTTP on the same /mcp", () => {
  let gateway: HttpGateway;
  const open: Array<{ close(): Promise<void> }> = [];
  const modern = async (token: string, headers: Record<string, string> = {}) => {
    const connected = await connectModernHttp(gateway.mcpUrl, {
      authorization: `Bearer ${token}`,
      ...headers,
    });
    open.push(connected);
    return connected;
  };
  const legacy = async (token: string, headers: Record<string, string> = {}) => {
    const connected = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { authorization: `Bearer ${token}`, ...headers } },
    );
    open.push(connected);
    return connected;
  };

  beforeAll(async () => {
    gateway = await startHttpGateway(eraConfig().configPath);
  });
  afterAll(async () => {
    for (const connection of open) await connection.close().catch(() => {});
    await gateway?.stop();
  });

  it("a 2026-07-28 client negotiates that revision, lists exactly exec and wait, and runs a cell", async () => {
    const { client } = await modern(ALICE);
    expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
    const listed = await client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    expect(listed.tools[0]!.annotations?.destructiveHint).toBe(true);
    const result = await client.callTool({
      name: "exec",
      arguments: { code: `console.log("hi"); return 1 + 1;` },
    });
    const structured = result.structuredContent as Structured & { output: Array<{ text: string }> };
    expect(structured.status).toBe("completed");
    expect(structured.value).toBe(2);
    // The cell's output is in the result (the new revision has no logging to carry it).
    expect(structured.output.map((item) => item.text)).toEqual(["hi"]);
  });

  // A stateless client has no session to keep values in: a cell's store belongs to the principal, narrowed
  // by the client's own codecell-session scope, and no other principal or scope reads it.
  it("a 2026-07-28 client's stored values outlive its connection, within its principal and scope", async () => {
    const writer = await modern(ALICE);
    const stored = await call(writer.client, "exec", {
      code: `await store("plan", { step: 3 }); return "kept";`,
    });
    expect(stored.status).toBe("completed");
    const reader = await modern(ALICE);
    const loaded = await call(reader.client, "exec", { code: `return await load("plan");` });
    expect(loaded).toMatchObject({ status: "completed", value: { step: 3 } });
    const other = await modern(BOB);
    expect(
      await call(other.client, "exec", { code: `return (await load("plan")) ?? "none";` }),
    ).toMatchObject({
      status: "completed",
      value: "none",
    });
    const scoped = await modern(ALICE, { "codecell-session": "another-task" });
    expect(
      await call(scoped.client, "exec", { code: `return (await load("plan")) ?? "none";` }),
    ).toMatchObject({
      status: "completed",
      value: "none",
    });
  });

  it("answers server/discover where the session era answers initialize", async () => {
    const response = await fetch(gateway.mcpUrl, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ALICE}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "server/discover",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "server/discover",
        params: {
          _meta: {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
          },
        },
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("mcp-session-id")).toBeNull();
    const body = (await response.json()) as { result: { supportedVersions: string[]; capabilities: object } };
    expect(body.result.supportedVersions).toContain("2026-07-28");
    expect(body.result.capabilities).toHaveProperty("tools");
  });

  it("a run belongs to the principal: another connection of it waits on it, another principal cannot", async () => {
    const first = await modern(ALICE);
    const started = await call(first.client, "exec", { code: YIELDING });
    expect(started.status).toBe("waiting");
    const runId = started.runId!;
    const stranger = await modern(BOB);
    const refused = await call(stranger.client, "wait", { runId });
    expect(refused.status).toBe("failed");
    expect(refused.error).toMatch(/unknown runId/);
    const second = await modern(ALICE);
    const finished = await call(second.client, "wait", { runId });
    expect(finished).toMatchObject({ status: "completed", value: "resumed" });
  });

  it("a codecell-session header narrows a 2026-07-28 client's runs to that scope", async () => {
    const scoped = await modern(ALICE, { "codecell-session": "task-7" });
    const started = await call(scoped.client, "exec", { code: YIELDING });
    const runId = started.runId!;
    const unscoped = await modern(ALICE);
    expect((await call(unscoped.client, "wait", { runId })).error).toMatch(/unknown runId/);
    const otherScope = await modern(ALICE, { "codecell-session": "task-8" });
    expect((await call(otherScope.client, "wait", { runId })).error).toMatch(/unknown runId/);
    const sameScope = await modern(ALICE, { "codecell-session": "task-7" });
    expect(await call(sameScope.client, "wait", { runId })).toMatchObject({ status: "completed" });
  });

  it("a session-era client keeps initialize and sessions; a wait from another session fails", async () => {
    const first = await legacy(ALICE);
    expect(first.client.getServerVersion()?.name).toBe("codecell");
    const listed = await first.client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    const started = await call(first.client, "exec", { code: YIELDING });
    const runId = started.runId!;
    const other = await legacy(ALICE);
    expect((await call(other.client, "wait", { runId })).error).toMatch(/unknown runId/);
    // Nor does a 2026-07-28 client of the same principal see a session's run.
    const stateless = await modern(ALICE);
    expect((await call(stateless.client, "wait", { runId })).error).toMatch(/unknown runId/);
    expect(await call(first.client, "wait", { runId })).toMatchObject({ status: "completed" });
  });

  it("connection-per-command session-era clients keep one scope with the codecell-session header", async () => {
    const first = await legacy(ALICE, { "codecell-session": "inspector-cli" });
    const runId = (await call(first.client, "exec", { code: YIELDING })).runId!;
    await first.close();
    const next = await legacy(ALICE, { "codecell-session": "inspector-cli" });
    expect(await call(next.client, "wait", { runId })).toMatchObject({
      status: "completed",
      value: "resumed",
    });
  });

  it("sends a 2026-07-28 client progress on the open request of a long cell", async () => {
    const { client } = await modern(ALICE);
    const updates: Array<{ progress: number; message?: string }> = [];
    const result = await client.callTool(
      {
        name: "exec",
        arguments: {
          code: `await MCP.everything.triggerLongRunningOperation({ duration: 2, steps: 4 }); return "ok";`,
        },
      },
      { onprogress: (update) => updates.push(update), timeout: 60_000 },
    );
    expect((result.structuredContent as Structured).status).toBe("completed");
    expect(updates.length).toBeGreaterThanOrEqual(2);
    const progress = updates.map((update) => update.progress);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    expect(updates.map((update) => update.message ?? "").join("\n")).toMatch(/nested calls: \d+ settled/);
  });

  it("asks a 2026-07-28 client to approve with an input-required result, and the retry resumes the run", async () => {
    const asked: string[] = [];
    const connected = await connectModernHttp(
      gateway.mcpUrl,
      { authorization: `Bearer ${ALICE}` },
      (message) => {
        asked.push(message);
        return true;
      },
    );
    open.push(connected);
    const approved = await call(connected.client, "exec", { code: tagged("approved-http") });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatch(/core:codecell:write_file/);
    // The cell ran once: its note before the approval is there once, and the approved write happened.
    expect(approved).toMatchObject({
      status: "completed",
      value: { written: { path: "approved-http.txt", bytes: 3 }, notes: 1 },
    });
  });

  it("a declined approval fails the call in the cell, which goes on", async () => {
    const connected = await connectModernHttp(
      gateway.mcpUrl,
      { authorization: `Bearer ${ALICE}` },
      () => false,
    );
    open.push(connected);
    const declined = await call(connected.client, "exec", { code: tagged("declined-http") });
    expect(declined.status).toBe("completed");
    expect(declined.value).toMatchObject({ notes: 1 });
    expect((declined.value as { written: string }).written).toMatch(
      /declined the call to core:codecell:write_file/,
    );
  });

  it("refuses the call with a reason when the 2026-07-28 client declares no elicitation", async () => {
    const { client } = await modern(ALICE);
    const refused = await call(client, "exec", { code: tagged("unasked-http") });
    expect((refused.value as { written: string }).written).toMatch(/declare the elicitation capability/);
  });

  it("sends a session-era client no log messages until it sets a level", async () => {
    const { client } = await legacy(ALICE);
    const messages: unknown[] = [];
    client.fallbackNotificationHandler = async (notification) => {
      if (notification.method === "notifications/message") messages.push(notification.params);
    };
    await call(client, "exec", { code: "return 1;" });
    expect(messages).toEqual([]);
    await client.setLoggingLevel("info");
    await call(client, "exec", { code: "return 2;" });
    expect(messages.length).toBeGreaterThan(0);
  });
});

describe("both protocol eras over stdio", () => {
  let configPath: string;
  const open: Array<{ close(): Promise<void> }> = [];
  beforeAll(() => {
    configPath = eraConfig().configPath;
  });
  afterAll(async () => {
    for (const connection of open) await connection.close().catch(() => {});
  });

  it("a 2026-07-28 client negotiates, lists exec and wait, and runs a cell", async () => {
    const connected = await connectModernStdio(configPath);
    open.push(connected);
    expect(connected.client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
    expect((await connected.client.listTools()).tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    const started = await call(connected.client, "exec", { code: YIELDING });
    expect(started.status).toBe("waiting");
    expect(await call(connected.client, "wait", { runId: started.runId })).toMatchObject({
      status: "completed",
      value: "resumed",
    });
  });

  it("a 2026-07-28 client approves a nested call over stdio through its retry", async () => {
    const connected = await connectModernStdio(configPath, () => true);
    open.push(connected);
    const approved = await call(connected.client, "exec", { code: tagged("approved-stdio") });
    expect(approved).toMatchObject({
      status: "completed",
      value: { written: { path: "approved-stdio.txt", bytes: 3 }, notes: 1 },
    });
  });

  it("a session-era client still opens with initialize", async () => {
    const connected: Connected = await connectStdio(configPath);
    open.push(connected);
    expect(connected.client.getServerVersion()?.name).toBe("codecell");
    expect((await call(connected.client, "exec", { code: "return 3;" })).value).toBe(3);
  });
});
