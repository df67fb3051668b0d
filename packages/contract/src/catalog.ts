import { z } from "zod";

/** Where a catalogued tool comes from: the host itself, a plugin, an MCP server, or the client app. */
export const TOOL_SOURCES = ["core", "plugin", "mcp", "client"] as const;
export type ToolSource = (typeof TOOL_SOURCES)[number];

export const toolCatalogEntrySchema = z.object({
  id: z.string(),
  name: z.string(),
  label: z.string().optional(),
  description: z.string(),
  source: z.enum(TOOL_SOURCES),
  sourceName: z.string().optional(),
});

/** Compact catalog metadata, as in `ALL_TOOLS`: no schema. */
export type ToolCatalogEntry = z.infer<typeof toolCatalogEntrySchema>;

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
 * The model-facing names of code mode's own controls. They never enter the hidden catalog, so guest
 * code can never reach exec or wait recursively.
 */
export const CODE_MODE_CONTROL_TOOL_NAMES = [
  "exec",
  "wait",
  "tool_search_code",
  "tool_search",
  "tool_describe",
  "tool_call",
] as const;
