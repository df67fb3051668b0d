import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { APP_DIR, callCodeMode, connectStdio, makeSetup } from "./harness.js";

// A real MCP server whose own tools are named exec, wait and tool_search.
const controlsServer = {
  command: process.execPath,
  args: [join(APP_DIR, "test", "fixtures", "control-names-server.mjs")],
};

function setupWith(codeMode: boolean) {
  return makeSetup({
    tools: { codeMode: codeMode ? { enabled: true, timeoutMs: 10_000 } : false },
    workspace: "./workspace",
    mcpServers: { controls: controlsServer },
  });
}

describe("tools that share a name with code mode's control tools", () => {
  // Spec: "The catalog omits code mode's control tools: exec, wait, tool_search_code, tool_search,
  // tool_describe, tool_call." Those are code mode's own tools; a downstream server's tools that happen
  // to carry those names are ordinary MCP tools, reached under MCP.<server>.
  it("code mode on: the model sees exactly exec and wait, and the server's own exec/wait/tool_search run under MCP.controls", async () => {
    const gateway = await connectStdio(setupWith(true).configPath);
    try {
      const listed = (await gateway.client.listTools()).tools.map((tool) => tool.name);
      expect(listed.sort()).toEqual(["exec", "wait"]);
      const result = await callCodeMode(gateway.client, "exec", {
        code: `
          const text = (r) => r.content[0].text;
          const header = await API.read("mcp/controls.d.ts");
          return {
            ran: text(await MCP.controls.exec({ command: "ls" })),
            waited: text(await MCP.controls.wait({ ms: 1 })),
            searched: text(await MCP.controls.toolSearch({ query: "x" })),
            declared: ["function exec(", "function wait(", "function toolSearch("].every((s) => header.includes(s)),
            inAllTools: ALL_TOOLS.some((t) => t.sourceName === "controls"),
          };`,
      });
      expect(result).toMatchObject({
        status: "completed",
        value: {
          ran: "server ran ls",
          waited: "server waited",
          searched: "server searched x",
          declared: true,
          inAllTools: false,
        },
      });
    } finally {
      await gateway.close();
    }
  });

  // Spec: "Disabled configuration leaves the existing tool exposure unchanged."
  it("code mode off: tools/list passes the server's exec, wait and tool_search through, and they run", async () => {
    const gateway = await connectStdio(setupWith(false).configPath);
    try {
      const listed = (await gateway.client.listTools()).tools.map((tool) => tool.name);
      expect(listed).toEqual(expect.arrayContaining(["exec", "wait", "tool_search"]));
      const ran = await gateway.client.callTool({ name: "exec", arguments: { command: "pwd" } });
      expect((ran.content as Array<{ text: string }>)[0]!.text).toBe("server ran pwd");
      const searched = await gateway.client.callTool({ name: "tool_search", arguments: { query: "q" } });
      expect((searched.content as Array<{ text: string }>)[0]!.text).toBe("server searched q");
    } finally {
      await gateway.close();
    }
  });
});
