/** What `serve --http` prints: where it listens and how to connect the common MCP clients. */
export function connectBanner(options: {
  url: string;
  mcpUrl: string;
  configFile: string;
  cliPath: string;
}): string {
  const { url, mcpUrl, configFile, cliPath } = options;
  const stdio = JSON.stringify({
    mcpServers: { codecell: { command: process.execPath, args: [cliPath, "serve", "--config", configFile] } },
  });
  const cursor = JSON.stringify({ mcpServers: { codecell: { url: mcpUrl } } });
  return [
    `codecell is running (config: ${configFile})`,
    "",
    `  Playground    ${url}`,
    `  MCP endpoint  ${mcpUrl}   (Streamable HTTP)`,
    `  Health        ${url}healthz`,
    "",
    "Connect a client:",
    `  Claude Code     claude mcp add --transport http codecell ${mcpUrl}`,
    `  Cursor          in .cursor/mcp.json: ${cursor}`,
    `  Claude Desktop  in claude_desktop_config.json (it starts its own gateway over stdio):`,
    `                  ${stdio}`,
    `  MCP Inspector   npx @modelcontextprotocol/inspector, then transport "Streamable HTTP" and URL ${mcpUrl}`,
    "",
    "Stop with Ctrl+C.",
  ].join("\n");
}
