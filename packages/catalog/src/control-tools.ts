import { CODE_MODE_CONTROL_TOOL_NAMES, type HostTool, isCodeModeControlTool } from "@codecell/contract";

// Every control name but `exec`: the host's own shell tool is also called exec, and the spec keeps it
// in the catalog (callable by id, `tools.exec` when unambiguous); only the code-mode exec is left out,
// and that one is known by its mark.
const namedControls: ReadonlySet<string> = new Set(
  CODE_MODE_CONTROL_TOOL_NAMES.filter((name) => name !== "exec"),
);

/**
 * True for a tool the catalog never holds: code mode's own controls. Those are the tools marked with
 * `markCodeModeControlTool` (the engine's exec and wait, whatever a host feeds back), and, by name as
 * the spec lists them, any core, plugin or client tool called `wait`, `tool_search_code`,
 * `tool_search`, `tool_describe` or `tool_call`: a host's tool-search controls and waits, which would
 * otherwise reach guest code as `tools.tool_search` and recurse. MCP tools are exempt from the names:
 * a downstream server's own `wait` lives under `MCP.<server>.wait` and is that server's tool, never
 * one of the host's controls.
 */
export function isControlTool(tool: HostTool): boolean {
  if (isCodeModeControlTool(tool)) return true;
  return tool.source !== "mcp" && namedControls.has(tool.name);
}
