import { describe, expect, it } from "vitest";
import { connectBanner } from "../../src/cli/banner.js";

const base = {
  url: "http://127.0.0.1:8787/",
  mcpUrl: "http://127.0.0.1:8787/mcp",
  configFile: "/srv/codecell.json5",
  cliPath: "/srv/codecell/dist/cli.js",
};
const agentRoutes = [
  { api: "OpenAI Chat Completions", url: "http://127.0.0.1:8787/v1/chat/completions" },
  { api: "Anthropic Messages", url: "http://127.0.0.1:8787/v1/messages" },
];

describe("the start-up banner of serve --http", () => {
  it("gives every HTTP client setup the bearer header, as a placeholder, when tokens are set", () => {
    const banner = connectBanner({ ...base, tokens: true, agentRoutes: [] });
    const lines = banner.split("\n");
    const claude = lines.find((line) => line.includes("claude mcp add"));
    expect(claude).toContain(`${base.mcpUrl} --header "Authorization: Bearer <your token>"`);
    const cursor = lines.find((line) => line.includes("Cursor"))!;
    expect(JSON.parse(cursor.slice(cursor.indexOf("{")))).toEqual({
      mcpServers: { codecell: { url: base.mcpUrl, headers: { Authorization: "Bearer <your token>" } } },
    });
    expect(lines.find((line) => line.includes("MCP Inspector"))).toContain(
      "Authorization: Bearer <your token>",
    );
    expect(banner).toMatch(/replace <your token> with one of the config's http\.tokens/);
  });

  it("sends no header without tokens", () => {
    const banner = connectBanner({ ...base, tokens: false, agentRoutes: [] });
    expect(banner).toContain(`claude mcp add --transport http codecell ${base.mcpUrl}\n`);
    expect(banner).not.toMatch(/Authorization|token/);
  });

  it("names the agent routes only when the config has an agent section", () => {
    const banner = connectBanner({ ...base, tokens: true, agentRoutes });
    expect(banner).toMatch(/OpenAI Chat Completions +POST http:\/\/127\.0\.0\.1:8787\/v1\/chat\/completions/);
    expect(banner).toMatch(/Anthropic Messages +POST http:\/\/127\.0\.0\.1:8787\/v1\/messages/);
    expect(connectBanner({ ...base, tokens: true, agentRoutes: [] })).not.toMatch(/\/v1\/|Agent endpoint/);
  });
});
