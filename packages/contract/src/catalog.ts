/** Where a catalogued tool comes from: the host itself, a plugin, an MCP server, or the client app. */
export const TOOL_SOURCES = ["core", "plugin", "mcp", "client"] as const;
export type ToolSource = (typeof TOOL_SOURCES)[number];

/** Compact catalog metadata, as in `ALL_TOOLS`: no schema. */
export type ToolCatalogEntry = {
  id: string;
  name: string;
  label?: string;
  description: string;
  source: ToolSource;
  sourceName?: string;
};

/** A catalog entry with its JSON Schema parameters, as `tools.describe(id)` returns it. */
export type ToolCatalogEntryWithSchema = ToolCatalogEntry & { parameters: unknown };

/**
 * A tool as the host knows it, before code mode catalogues it: one of the run's effective tools from
 * any of the four sources. `owner` is the plugin id, the MCP server id, the client app, or the host's own
 * name for core tools; `directOnly` tools stay visible to the model and never enter the catalog.
 */
export type HostTool = {
  name: string;
  label?: string;
  description: string;
  /** JSON Schema of the input object. */
  parameters: unknown;
  /** JSON Schema of the structured result, when the tool declares one (MCP `outputSchema`). */
  outputSchema?: unknown;
  source: ToolSource;
  owner: string;
  directOnly?: boolean;
};

/**
 * The model-facing names of code mode's own controls, as the spec lists them. The model surface may not
 * duplicate one (a `directOnly` tool cannot take one), and the catalog leaves out core, plugin and
 * client tools with any of them but `exec`, the host's shell tool's name too (`isControlTool` of
 * `@codecell/catalog`); the code-mode exec itself is known by identity, see `markCodeModeControlTool`.
 */
export const CODE_MODE_CONTROL_TOOL_NAMES = [
  "exec",
  "wait",
  "tool_search_code",
  "tool_search",
  "tool_describe",
  "tool_call",
] as const;

// A registered symbol, so the mark survives object spreads and a second copy of this package; it does
// not survive JSON, so nothing that arrives as data (an MCP tools/list answer, a plugin manifest) can
// claim it. Only host code that holds the tool object can mark it.
const CONTROL_TOOL_MARK = Symbol.for("codecell.codeModeControlTool");

/**
 * Marks a tool object as one of code mode's own controls: the engine's `exec` and `wait`, or a host's
 * tool-search tools (`tool_search`, `tool_describe`, `tool_call`, ...). The catalog leaves marked tools
 * out, so guest code can never reach them; every unmarked tool is catalogued whatever its name.
 */
export function markCodeModeControlTool<T extends object>(tool: T): T {
  Object.defineProperty(tool, CONTROL_TOOL_MARK, { value: true, enumerable: true });
  return tool;
}

/** True for a tool object marked with `markCodeModeControlTool` (or a spread copy of one). */
export function isCodeModeControlTool(tool: unknown): boolean {
  return (
    typeof tool === "object" && tool !== null && (tool as Record<symbol, unknown>)[CONTROL_TOOL_MARK] === true
  );
}
