import { describe, expect, it } from "vitest";
import { callCodeMode, connectStdio, makeSetup } from "./harness.js";

describe("MCP resources and prompts through the executor", () => {
  it("lists and reads resources and renders prompts of a real server", async () => {
    const setup = makeSetup({
      tools: { codeMode: true },
      mcpServers: { everything: { package: "@modelcontextprotocol/server-everything", args: ["stdio"] } },
    });
    const gateway = await connectStdio(setup.configPath);
    try {
      const result = await callCodeMode(gateway.client, "exec", {
        code: `
          const listed = await MCP.everything.resources.list();
          const uri = listed.resources.find((r) => r.uri.endsWith("architecture.md")).uri;
          const read = await MCP.everything.resources.read({ uri });
          const prompts = await MCP.everything.prompts.list();
          const prompt = await MCP.everything.prompts.get({ name: "args-prompt", arguments: { city: "Lisbon" } });
          let refused;
          try { await MCP.everything.resources.read({}); } catch (e) { refused = e.message; }
          return { uri, text: read.contents[0].text.length > 0, names: prompts.prompts.map((p) => p.name),
                   prompt: JSON.stringify(prompt.messages), refused };`,
      });
      expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
      const value = result.value as {
        uri: string;
        text: boolean;
        names: string[];
        prompt: string;
        refused: string;
      };
      expect(value.text).toBe(true);
      expect(value.names).toContain("args-prompt");
      expect(value.prompt).toContain("Lisbon");
      expect(value.refused).toMatch(/resources\.read needs \{ uri/);
    } finally {
      await gateway.close();
    }
  });
});
