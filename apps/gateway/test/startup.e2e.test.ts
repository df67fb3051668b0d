// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import {
  APP_DIR,
  baseConfig,
  CLI,
  callCodeMode,
  connectHttp,
  makeSetup,
  startHttpGateway,
  until,
} from "./harness.js";

// The promise tested here: "A downstream server that never answers initialize blocks start-up 30 s and its child
// process is left orphaned (parent pid 1). Connect servers in parallel with a per-server deadline; serve as
// soon as the gateway is ready and add late servers with tools/list_changed; always kill what was spawned,
// on every path (failed start, shutdown, crash)."

const HUNG = join(APP_DIR, "test", "fixtures", "hung-server.mjs");
const LATE = join(APP_DIR, "test", "fixtures", "late-server.mjs");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A config whose `hung` server never answers and writes its pid beside the config. */
function setupWithHung(hungDeadlineMs: number, extra: Record<string, unknown> = {}) {
  const setup = makeSetup(
    baseConfig({
      mcpServers: {
        hung: {
          command: process.execPath,
          args: [HUNG],
          env: { PID_FILE: "${CODECELL_CONFIG_DIR}/hung.pid" },
          connectTimeoutMs: hungDeadlineMs,
        },
        ...((extra.mcpServers as Record<string, unknown>) ?? {}),
      },
      mcpStartupWaitMs: extra.mcpStartupWaitMs ?? 300,
    }),
  );
  const pidFile = join(setup.dir, "hung.pid");
  const hungPid = async () => {
    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "", "the hung server's pid");
    return Number(readFileSync(pidFile, "utf8"));
  };
  return { ...setup, hungPid };
}

describe("downstream servers that are slow or never answer", () => {
  it("serves at once, adds a late server with list_changed, and stops the hung one at its deadline", async () => {
    const setup = setupWithHung(4000, {
      mcpServers: { late: { command: process.execPath, args: [LATE], env: { DELAY_MS: "2500" } } },
    });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "serve", "--config", setup.configPath],
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const client = new Client({ name: "startup-test", version: "1.0.0" });
    let listChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      listChanged++;
    });
    try {
      await client.connect(transport);
      const pid = await setup.hungPid();
      // Answered while the hung server is still inside its 4 s deadline and the late one not yet up.
      const tools = await client.listTools();
      expect(tools.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
      expect(stderr).not.toContain('MCP server "hung"');
      const before = await callCodeMode(client, "exec", { code: "return Object.keys(MCP);" });
      expect(before.value).toEqual([]);

      await until(() => listChanged > 0, "tools/list_changed for the late server");
      // stderr is its own pipe: the log line may land just after the notification.
      await until(
        () => stderr.includes('MCP server "late": connected after the gateway started serving'),
        "the late server's log line",
      );
      expect(listChanged).toBe(1);
      const after = await callCodeMode(client, "exec", {
        code: "const r = await MCP.late.hello({}); return r.content[0].text;",
      });
      expect(after).toMatchObject({ status: "completed", value: "hello, late" });

      // The hung server is reported with its deadline, and its process is gone (it ignores SIGTERM).
      await until(() => /MCP server "hung": failed to start/.test(stderr), "the hung server's failure");
      expect(stderr).toMatch(/no answer to initialize within 4000 ms \(connectTimeoutMs\)/);
      await until(() => !alive(pid), `the hung server (pid ${pid}) to be stopped`);
    } finally {
      await client.close();
    }
  });

  it("kills a server still starting when the gateway shuts down (HTTP, SIGTERM)", async () => {
    const setup = setupWithHung(120_000);
    const gateway = await startHttpGateway(setup.configPath);
    try {
      const pid = await setup.hungPid();
      const session = await connectHttp(gateway.mcpUrl);
      expect((await session.client.listTools()).tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
      const health = (await (await fetch(`${gateway.url}healthz`)).json()) as {
        mcpServers: Array<{ server: string; state: string; pid?: number }>;
      };
      expect(health.mcpServers).toEqual([{ server: "hung", state: "connecting", tools: 0, pid }]);
      await session.close();
      expect(await gateway.stop()).toBe(0);
      await until(() => !alive(pid), `the hung server (pid ${pid}) to be stopped`, 5000);
    } finally {
      await gateway.stop();
    }
  });

  it("kills what it spawned when stopped before it finished starting", async () => {
    const setup = setupWithHung(120_000, { mcpStartupWaitMs: 60_000 });
    const child = spawn(process.execPath, [CLI, "serve", "--config", setup.configPath], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const pid = await setup.hungPid();
      expect(alive(pid)).toBe(true);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      // The exit hook kills synchronously: nothing is left for init to adopt.
      await until(() => !alive(pid), `the hung server (pid ${pid}) to be stopped`, 2000);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
