/** A route of the agent endpoint, as the banner names it. */
export type AgentRoute = { api: string; url: string };

/**
 * What a client sends in place of the token: the banner says how to authenticate, and the token itself
 * never appears in it (the banner ends up in terminals, logs and screenshots).
 */
export const TOKEN_PLACEHOLDER = "<your token>";

/** What `serve --http` prints: where it listens and how to connect the common MCP clients. */
export function connectBanner(options: {
  url: string;
  mcpUrl: string;
  configFile: string;
  cliPath: string;
  /** The config has `http.tokens`: every client needs `Authorization: Bearer <token>`. */
  tokens: boolean;
  /** The agent endpoint's routes; empty when the config has no `agent` section. */
  agentRoutes: AgentRoute[];
}): string {
  const { url, mcpUrl, configFile, cliPath, tokens, agentRoutes } = options;
  const bearer = `Bearer ${TOKEN_PLACEHOLDER}`;
  const stdio = JSON.stringify({
    mcpServers: { codecell: { command: process.execPath, args: [cliPath, "serve", "--config", configFile] } },
  });
  const cursor = JSON.stringify({
    mcpServers: { codecell: { url: mcpUrl, ...(tokens ? { headers: { Authorization: bearer } } : {}) } },
  });
  const claudeCode = `claude mcp add --transport http codecell ${mcpUrl}${tokens ? ` --header "Authorization: ${bearer}"` : ""}`;
  const inspector = `npx @modelcontextprotocol/inspector, then transport "Streamable HTTP" and URL ${mcpUrl}${tokens ? `, header Authorization: ${bearer}` : ""}`;
  const width = Math.max(0, ...agentRoutes.map((route) => route.api.length));
  const agent = agentRoutes.length
    ? [
        "",
        `Agent endpoint (code mode in front of the config's upstream model${tokens ? `; send Authorization: ${bearer}` : ""}):`,
        ...agentRoutes.map((route) => `  ${route.api.padEnd(width)}  POST ${route.url}`),
      ]
    : [];
  return [
    `codecell is running (config: ${configFile})`,
    "",
    `  Playground    ${url}`,
    `  MCP endpoint  ${mcpUrl}   (Streamable HTTP)`,
    `  Health        ${url}healthz`,
    ...agent,
    "",
    tokens
      ? `Connect a client (replace ${TOKEN_PLACEHOLDER} with one of the config's http.tokens):`
      : "Connect a client:",
    `  Claude Code     ${claudeCode}`,
    `  Cursor          in .cursor/mcp.json: ${cursor}`,
    `  Claude Desktop  in claude_desktop_config.json (it starts its own gateway over stdio):`,
    `                  ${stdio}`,
    `  MCP Inspector   ${inspector}`,
    "",
    "Stop with Ctrl+C.",
  ].join("\n");
}
