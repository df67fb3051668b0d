import { join } from "node:path";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { APP_DIR, callCodeMode, connectStdio, makeSetup, until } from "./harness.js";

const changingServer = {
  command: process.execPath,
  args: [join(APP_DIR, "test", "fixtures", "changing-server.mjs")],
};

describe("a downstream server that changes its tools", () => {
  it("tells the client, and the passthrough list follows", async () => {
    const setup = makeSetup({ tools: { codeMode: false }, mcpServers: { changing: changingServer } });
    const gateway = await connectStdio(setup.configPath);
    let notified = 0;
    gateway.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      notified++;
    });
    try {
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(["add_tool"]);
      await gateway.client.callTool({ name: "add_tool", arguments: {} });
      await until(() => notified > 0, "tools/list_changed");
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual([
        "add_tool",
        "extra_tool",
      ]);
    } finally {
      await gateway.close();
    }
  });

  it("gives later cells the new tool in code mode", async () => {
    const setup = makeSetup({ tools: { codeMode: true }, mcpServers: { changing: changingServer } });
    const gateway = await connectStdio(setup.configPath);
    try {
      const before = await callCodeMode(gateway.client, "exec", {
        code: "await MCP.changing.addTool({}); return typeof MCP.changing.extraTool;",
      });
      expect(before).toMatchObject({ status: "completed", value: "undefined" });
      await until(async () => {
        const after = await callCodeMode(gateway.client, "exec", {
          code: "return typeof MCP.changing.extraTool;",
        });
        return after.value === "function";
      }, "MCP.changing.extraTool");
    } finally {
      await gateway.close();
    }
  });
});
