import { TOOL_SOURCES, type ToolSource } from "@codecell/contract";

/** The catalog id of a tool: `<source>:<owner>:<tool-name>`, e.g. `core:host:read_file`. */
export function toolId(source: ToolSource, owner: string, name: string): string {
  return `${source}:${owner}:${name}`;
}

const sourceRank: ReadonlyMap<string, number> = new Map(TOOL_SOURCES.map((source, index) => [source, index]));

/**
 * Catalog order: by source (core, plugin, mcp, client), then owner, then name, compared by code unit so
 * the order never depends on the input order or on the process locale.
 */
export function compareCatalogOrder(
  a: { source: ToolSource; owner: string; name: string },
  b: { source: ToolSource; owner: string; name: string },
): number {
  return (
    sourceRank.get(a.source)! - sourceRank.get(b.source)! ||
    compareCodeUnits(a.owner, b.owner) ||
    compareCodeUnits(a.name, b.name)
  );
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
