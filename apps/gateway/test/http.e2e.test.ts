import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  baseConfig,
  callCodeMode,
  connectHttp,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
} from "./harness.js";

describe("codecell serve --http", () => {
  let gateway: HttpGateway;

  beforeAll(async () => {
    const setup = makeSetup(
      baseConfig({
        tools: {
          codeMode: { enabled: true, timeoutMs: 1500 },
          allow: ["*", "core:codecell:exec"],
          approval: ["core:codecell:write_file"],
        },
      }),
    );
    gateway = await startHttpGateway(setup.configPath);
  });
  afterAll(async () => {
    const code = await gateway?.stop();
    // SIGTERM is a clean stop.
    expect(code).toBe(0);
  });

  it("prints how to connect clients", () => {
    const output = gateway.output();
    expect(output).toContain(`claude mcp add --transport http codecell ${gateway.mcpUrl}\n`);
    // No tokens, no agent section: no header to send, no agent routes to name.
    expect(output).not.toMatch(/Authorization|Agent endpoint/);
    expect(output).toMatch(/Cursor/);
    expect(output).toMatch(/Claude Desktop/);
    expect(output).toMatch(/MCP Inspector/);
  });

  it("answers /healthz and serves a page at /", async () => {
    const health = (await (await fetch(`${gateway.url}healthz`)).json()) as Record<string, unknown>;
    expect(health).toMatchObject({
      status: "ok",
      codeMode: true,
      mcpServers: [{ server: "memory", state: "ready" }],
    });
    const page = await fetch(gateway.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/codecell/);
    const foreign = await fetch(`${gateway.url}healthz`, { headers: { origin: "https://evil.example" } });
    expect(foreign.status).toBe(403);
  });

  it("lists exactly exec and wait and runs a cell", async () => {
    const session = await connectHttp(gateway.mcpUrl);
    try {
      const { tools } = await session.client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
      const result = await callCodeMode(session.client, "exec", {
        code: "const g = await MCP.memory.readGraph({}); return { ok: Array.isArray(g.structuredContent.entities) }",
      });
      expect(result).toMatchObject({ status: "completed", value: { ok: true } });
    } finally {
      await session.close();
    }
  });

  it("suspends on a slow tool, resumes with wait, and refuses the runId in another session", async () => {
    const first = await connectHttp(gateway.mcpUrl);
    const second = await connectHttp(gateway.mcpUrl);
    try {
      const waiting = await callCodeMode(first.client, "exec", {
        code: `text("start"); const r = await tools.call("core:codecell:exec", { command: "sleep 2.5; echo slow done" }); return r.stdout.trim();`,
      });
      expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
      expect(waiting.reason).toBe("pending_tools");
      expect(waiting.pendingToolCalls).toEqual([expect.objectContaining({ toolId: "core:codecell:exec" })]);

      const stolen = await callCodeMode(second.client, "wait", { runId: waiting.runId });
      expect(stolen).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(stolen.error).toMatch(/unknown runId/i);

      let result = await callCodeMode(first.client, "wait", { runId: waiting.runId });
      for (let i = 0; i < 10 && result.status === "waiting"; i++) {
        result = await callCodeMode(first.client, "wait", { runId: result.runId });
      }
      expect(result).toMatchObject({ status: "completed", value: "slow done" });
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("asks the client to approve through elicitation, and records the approval and the decline", async () => {
    const session = await connectHttp(gateway.mcpUrl, { elicitation: { form: {} } });
    const asked: string[] = [];
    let answer = true;
    session.client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(String(request.params.message));
      return answer ? { action: "accept", content: { approve: true } } : { action: "decline" };
    });
    try {
      const approved = await callCodeMode(session.client, "exec", {
        code: `return await tools.write_file({ path: "approved.txt", content: "yes" });`,
      });
      expect(approved).toMatchObject({ status: "completed", value: { path: "approved.txt", bytes: 3 } });
      expect(asked[0]).toMatch(/core:codecell:write_file/);

      answer = false;
      const declined = await callCodeMode(session.client, "exec", {
        code: `try { await tools.write_file({ path: "declined.txt", content: "no" }); return "written"; } catch (e) { return e.message; }`,
      });
      expect(declined.value).toMatch(/declined the call to core:codecell:write_file/);
      const read = await session.client.readResource({ uri: "codecell://session/trajectory" });
      const trajectory = JSON.parse((read.contents[0] as { text: string }).text) as {
        entries: Array<{ kind: string; tool: string; status: string; error?: string; notes?: string[] }>;
      };
      const writes = trajectory.entries.filter(
        (entry) => entry.kind === "nested" && entry.tool === "core:codecell:write_file",
      );
      expect(writes.map((entry) => entry.status)).toEqual(["completed", "failed"]);
      expect(writes[0]!.notes).toEqual(["approved by the user"]);
      expect(writes[1]!.error).toMatch(/declined/);
    } finally {
      await session.close();
    }
  });

  it("refuses a call that needs approval when the client cannot be asked", async () => {
    const session = await connectHttp(gateway.mcpUrl);
    try {
      const result = await callCodeMode(session.client, "exec", {
        code: `try { await tools.write_file({ path: "refused.txt", content: "no" }); return "written"; } catch (e) { return e.message; }`,
      });
      expect(result.value).toMatch(/does not support elicitation\. The call was not made/);
    } finally {
      await session.close();
    }
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("the embedded default (what npm start runs)", () => {
  it("serves with no config file and stops cleanly on SIGTERM, closing the downstream server", async () => {
    const gateway = await startHttpGateway(null);
    const health = (await (await fetch(`${gateway.url}healthz`)).json()) as {
      codeMode: boolean;
      mcpServers: Array<{ server: string; state: string; pid?: number }>;
    };
    expect(health.codeMode).toBe(true);
    const memory = health.mcpServers.find((server) => server.server === "memory");
    expect(memory).toMatchObject({ state: "ready", pid: expect.any(Number) });
    const session = await connectHttp(gateway.mcpUrl);
    try {
      const result = await callCodeMode(session.client, "exec", {
        code: `const todo = await tools.read_file({ path: "todo.md" }); const notes = await Notes.list();
               return { todo: todo.content.startsWith("# Todo"), notes: notes.length };`,
      });
      expect(result).toMatchObject({ status: "completed", value: { todo: true, notes: 2 } });
    } finally {
      await session.close();
    }
    expect(await gateway.stop()).toBe(0);
    expect(gateway.output()).toMatch(/SIGTERM received, shutting down/);
    expect(alive(memory!.pid!)).toBe(false);
  });
});
