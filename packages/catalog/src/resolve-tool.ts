import { CodeModeError, closestMatches } from "@codecell/contract";
import type { CatalogTool } from "./tool-catalog.js";

/**
 * Resolves what a guest passed to `describe` or `call`: an exact id first, else a name that exactly
 * one visible tool has. Outside the MCP-inclusive view, MCP entries do not exist for resolution, so an
 * MCP id gets a pointer to the `MCP` namespace instead of the tool.
 */
export function resolveTool(
  entries: readonly CatalogTool[],
  byId: ReadonlyMap<string, CatalogTool>,
  byName: ReadonlyMap<string, readonly CatalogTool[]>,
  idOrName: unknown,
  includeMcp: boolean,
  purpose: "describe" | "call",
): CatalogTool {
  const helper = `tools.${purpose}`;
  if (typeof idOrName !== "string" || idOrName === "") {
    throw new CodeModeError(
      "invalid_input",
      `${helper} expects a tool id such as "core:host:read_file" (from tools.search or ALL_TOOLS), got ${idOrName === "" ? "an empty string" : typeof idOrName}.`,
    );
  }
  const visible = (entry: CatalogTool) => includeMcp || entry.source !== "mcp";

  const exact = byId.get(idOrName);
  if (exact !== undefined && visible(exact)) return exact;

  const named = (byName.get(idOrName) ?? []).filter(visible);
  if (named.length === 1) return named[0]!;
  if (named.length > 1) {
    const candidates = named.map((entry) => entry.id);
    throw new CodeModeError(
      "invalid_input",
      `Tool name "${idOrName}" is ambiguous: ${candidates.map((id) => `"${id}"`).join(", ")}. Pass one of these ids to ${helper}.`,
      { tool: idOrName, candidates },
    );
  }

  if (exact !== undefined) {
    // Only an MCP entry outside the guest view gets here.
    throw new CodeModeError(
      "invalid_input",
      `"${idOrName}" is an MCP tool; call it as MCP.<server>.<tool>({...}) and read its declaration with API.read("mcp/<server>.d.ts"), not through ${helper}.`,
      { tool: idOrName, source: "mcp" },
    );
  }
  const pool = entries.filter(visible);
  const suggestions = closestMatches(
    idOrName,
    uniqueStrings(pool.flatMap((entry) => [entry.id, entry.name])),
    3,
  );
  const hint =
    suggestions.length > 0
      ? ` Did you mean ${suggestions.map((suggestion) => `"${suggestion}"`).join(", ")}?`
      : " Use tools.search(query) to find a tool's id.";
  throw new CodeModeError("invalid_input", `Unknown tool "${idOrName}".${hint}`, {
    tool: idOrName,
    suggestions,
  });
}

function uniqueStrings(values: string[]): string[] {
  return [...new Set(values)];
}
