import type { Gateway } from "../gateway.js";

/**
 * Why a config with code mode on leaves a cell nothing to call, or null when it gives at least one tool
 * (or when that cannot be known yet: MCP servers that were not started may bring tools). The engine
 * turns code mode off for a run without tools, so such a config shows an MCP client no tools at all and
 * refuses every `exec`: `check` says so, and `exec` stops on it before running anything.
 */
export function nothingToCall(gateway: Gateway, mcpConnected: boolean): string | null {
  const { config } = gateway;
  if (!config.codeMode.enabled) return null;
  if (!mcpConnected && Object.keys(config.mcpServers).length > 0) return null;
  if (gateway.effectiveTools().length > 0) return null;
  const offered = gateway.hostTools().length;
  const why =
    offered > 0
      ? `tools.allow and tools.deny leave none of its ${offered} tool(s)`
      : "no workspace, plugin or MCP server gives it a tool";
  return (
    `${config.file}: code mode is on but a cell has nothing to call: ${why}, so code mode stays off and an MCP client sees no tools. ` +
    (offered > 0
      ? "Allow some of them in tools.allow, or deny fewer."
      : `Add "workspace": "./workspace" (file tools), a plugin, or an MCP server under "mcpServers".`)
  );
}
