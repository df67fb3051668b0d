// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  APP_DIR,
  baseConfig,
  type Connected,
  callCodeMode,
  connectHttp,
  connectStdio,
  everythingBin,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
  until,
} from "./harness.js";

const SLOW_SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function setupWithServers() {
  const setup = makeSetup(
    baseConfig({
      tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
      mcpServers: {
        everything: { command: process.execPath, args: [everythingBin(), "stdio"] },
        slow: {
          command: process.execPath,
          args: [SLOW_SERVER],
          env: { CALL_LOG: "${CODECELL_CONFIG_DIR}/calls.log" },
        },
      },
    }),
  );
  const callLog = () => {
    const file = join(setup.dir, "calls.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  };
  return { ...setup, callLog };
}

type Trajectory = {
  entries: Array<{ kind: string; tool: string; status: string; code?: string; parentToolCallId?: string }>;
};
async function trajectoryOf(session: Connected): Promise<Trajectory> {
  const read = await session.client.readResource({ uri: "codecell://session/trajectory" });
  return JSON.parse((read.contents[0] as { text: string }).text) as Trajectory;
}

describe("cancellation, progress and logging over stdio", () => {
  let setup: ReturnType<typeof setupWithServers>;
  let session: Connected;

  beforeAll(async () => {
    setup = setupWithServers();
    session = await connectStdio(setup.configPath);
  });
  afterAll(async () => {
    await session?.close();
  });

  it("notifications/cancelled aborts the run and its downstream call, and nothing after it happens", async () => {
    const controller = new AbortController();
    const call = session.client.callTool(
      {
        name: "exec",
        arguments: {
          code: `await tools.write_file({ path: "before.txt", content: "1" });
await MCP.slow.waitLong({ seconds: 20 });
await tools.write_file({ path: "after.txt", content: "2" });
return "done";`,
        },
      },
      undefined,
      { signal: controller.signal, timeout: 60_000 },
    );
    await until(() => setup.callLog().includes("started"), "the downstream call to start");
    expect(existsSync(join(setup.workspace, "before.txt"))).toBe(true);
    controller.abort("the user pressed stop");
    await expect(call).rejects.toThrow();
    // The downstream server got its own notifications/cancelled.
    await until(() => setup.callLog().includes("cancelled"), "the downstream server to see the cancellation");
    await sleep(1000);
    expect(setup.callLog()).not.toContain("finished");
    expect(existsSync(join(setup.workspace, "after.txt"))).toBe(false);
    // The trajectory records the abort: the exec call and the nested call both end aborted.
    const { entries } = await trajectoryOf(session);
    const exec = entries.filter((entry) => entry.kind === "control").at(-1)!;
    expect(exec).toMatchObject({ tool: "exec", status: "failed", code: "aborted" });
    const nested = entries.filter((entry) => entry.tool === "mcp:slow:wait_long").at(-1)!;
    expect(nested.status).toBe("failed");
  });

  it("a cancelled loop of write_file stops writing", async () => {
    const abortedExecs = async () =>
      (await trajectoryOf(session)).entries.filter(
        (entry) => entry.kind === "control" && entry.tool === "exec" && entry.status === "failed",
      ).length;
    const abortedBefore = await abortedExecs();
    const controller = new AbortController();
    const call = session.client.callTool(
      {
        name: "exec",
        arguments: {
          code: `for (let i = 0; i < 100000; i++) await tools.write_file({ path: "loop/f" + i + ".txt", content: "x" }); return "all";`,
        },
      },
      undefined,
      { signal: controller.signal, timeout: 60_000 },
    );
    const loop = join(setup.workspace, "loop");
    const count = () => (existsSync(loop) ? readdirSync(loop).length : 0);
    await until(() => count() >= 20, "the loop to write files");
    controller.abort();
    await expect(call).rejects.toThrow();
    // Once the gateway has ended the run (its exec recorded as failed), nothing more is written.
    await until(async () => (await abortedExecs()) > abortedBefore, "the gateway to end the cancelled run");
    const afterCancel = count();
    await sleep(1500);
    expect(count()).toBe(afterCancel);
    expect(afterCancel).toBeLessThan(100000);
  });

  it("sends rate-limited progress with nested calls and the downstream server's own progress", async () => {
    const updates: Array<{ progress: number; message?: string }> = [];
    const started = Date.now();
    const result = await session.client.callTool(
      {
        name: "exec",
        arguments: {
          code: `await MCP.everything.triggerLongRunningOperation({ duration: 2, steps: 4 }); return "ok";`,
        },
      },
      undefined,
      { onprogress: (update) => updates.push(update), timeout: 60_000 },
    );
    const tookMs = Date.now() - started;
    expect((result.structuredContent as { status: string }).status).toBe("completed");
    expect(updates.length).toBeGreaterThanOrEqual(3);
    // Rate-limited to one update per 250 ms of the call (a loaded machine stretches the call, and the
    // limit with it), plus the four downstream steps: a 2 s cell sends about a dozen, never hundreds.
    expect(updates.length).toBeLessThanOrEqual(Math.ceil(tookMs / 250) + 4);
    const progress = updates.map((update) => update.progress);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    const messages = updates.map((update) => update.message ?? "").join("\n");
    expect(messages).toMatch(/mcp:everything:trigger-long-running-operation: \d\/4/);
    expect(messages).toMatch(/nested calls: 0 settled, 1 pending/);
  });

  it("offers logging: setLevel, run events and the downstream server's messages per logger", async () => {
    const messages: Array<{ level: string; logger?: string; data: unknown }> = [];
    session.client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      messages.push(notification.params);
    });
    await session.client.setLoggingLevel("debug");
    await callCodeMode(session.client, "exec", {
      code: `await MCP.everything.toggleSimulatedLogging({}); return 1;`,
    });
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          level: "debug",
          logger: "codecell.run",
          data: expect.objectContaining({ event: "exec started" }),
        }),
        expect.objectContaining({
          level: "info",
          logger: "codecell.run",
          data: expect.objectContaining({ event: "exec completed" }),
        }),
      ]),
    );
    await until(
      () => messages.some((message) => message.logger?.startsWith("mcp.everything")),
      "a downstream log message",
      12_000,
    );
    // A higher level silences what is below it.
    await session.client.setLoggingLevel("error");
    const before = messages.filter((message) => message.logger === "codecell.run").length;
    await callCodeMode(session.client, "exec", { code: "return 2" });
    expect(messages.filter((message) => message.logger === "codecell.run").length).toBe(before);
  });

  it("gives exec and wait titles and annotations, and unknown resources -32002", async () => {
    const { tools } = await session.client.listTools();
    const exec = tools.find((tool) => tool.name === "exec")!;
    expect(exec.title).toBe("Run a code cell");
    expect(exec.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      openWorldHint: true,
    });
    expect(tools.find((tool) => tool.name === "wait")!.title).toBe("Wait for a code cell");
    await expect(session.client.readResource({ uri: "codecell://nope" })).rejects.toMatchObject({
      code: -32002,
    });
  });
});

describe("cancellation and HTTP hygiene over HTTP", () => {
  let setup: ReturnType<typeof setupWithServers>;
  let gateway: HttpGateway;

  beforeAll(async () => {
    setup = setupWithServers();
    gateway = await startHttpGateway(setup.configPath);
  });
  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
  });

  it("a client that goes away mid-request aborts the run", async () => {
    const session = await connectHttp(gateway.mcpUrl);
    const controller = new AbortController();
    const call = session.client.callTool(
      {
        name: "exec",
        arguments: {
          code: `await MCP.slow.waitLong({ seconds: 20 }); await tools.write_file({ path: "http-after.txt", content: "2" }); return 1;`,
        },
      },
      undefined,
      { signal: controller.signal, timeout: 60_000 },
    );
    await until(() => setup.callLog().includes("started"), "the downstream call to start");
    // Closing the client drops the request's HTTP stream without a cancellation message.
    await session.client.close();
    await expect(call).rejects.toThrow();
    await until(() => setup.callLog().includes("cancelled"), "the downstream server to see the cancellation");
    await sleep(1000);
    expect(existsSync(join(setup.workspace, "http-after.txt"))).toBe(false);
  });

  it("answers unknown paths with JSON 404 and GET /mcp without a session with 405", async () => {
    for (const path of [
      ".well-known/oauth-authorization-server",
      ".well-known/oauth-protected-resource",
      "sse",
      "anything",
    ]) {
      const response = await fetch(`${gateway.url}${path}`);
      expect(response.status, path).toBe(404);
      expect(response.headers.get("content-type")).toMatch(/application\/json/);
      expect(await response.json()).toMatchObject({ error: expect.stringMatching(/Nothing at/) });
    }
    const get = await fetch(gateway.mcpUrl, { headers: { accept: "text/event-stream" } });
    expect(get.status).toBe(405);
    const page = await fetch(gateway.url);
    expect(page.status).toBe(200);
  });
});
