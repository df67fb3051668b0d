import {
  CODE_MODE_CONTROL_TOOL_NAMES,
  CODE_MODE_LIMITS,
  CodeModeError,
  type HostTool,
  isCodeModeControlTool,
  TOOL_SOURCES,
  type ToolCatalogEntry,
  type ToolSource,
} from "@codecell/contract";
import { isControlTool } from "./control-tools.js";
import { compilePolicy } from "./policy.js";
import { resolveTool } from "./resolve-tool.js";
import { convenienceNamesFor } from "./safe-names.js";
import { SearchIndex } from "./search-index.js";
import type { CatalogTool, DescribedTool, ToolCatalog, ToolCatalogOptions } from "./tool-catalog.js";
import { compareCatalogOrder, toolId } from "./tool-id.js";

const controlNames: ReadonlySet<string> = new Set(CODE_MODE_CONTROL_TOOL_NAMES);

/**
 * Builds a run's catalog from the host's effective tools. Policy comes first, so a denied tool exists in
 * no view and under no id; then code mode's own control tools are dropped (`isControlTool`: marked ones,
 * and the spec's control names but `exec`, so the host's shell `exec` stays an ordinary tool).
 * `directOnly` tools are set aside.
 * The result does not depend on the input order.
 */
export function buildToolCatalog(tools: readonly HostTool[], options: ToolCatalogOptions = {}): ToolCatalog {
  if (!Array.isArray(tools)) {
    throw new CodeModeError("invalid_config", "buildToolCatalog expects an array of host tools.");
  }
  const limits = searchLimits(options);
  const allowed = compilePolicy(options);

  const catalogued: Array<{ tool: HostTool; source: ToolSource; owner: string; name: string; id: string }> =
    [];
  const directOnly: HostTool[] = [];
  const seen = new Map<string, number>();
  tools.forEach((tool, index) => {
    checkHostTool(tool, index);
    const id = toolId(tool.source, tool.owner, tool.name);
    if (!allowed(id, tool.name) || isCodeModeControlTool(tool)) return;
    if (tool.directOnly === true) {
      if (controlNames.has(tool.name)) {
        throw new CodeModeError(
          "invalid_config",
          `Tool "${id}" is directOnly but named "${tool.name}", a code-mode control tool name; the model would see two tools of that name. Rename it, or drop directOnly so it is catalogued.`,
          { toolId: id },
        );
      }
      directOnly.push(tool);
      return;
    }
    if (isControlTool(tool)) return;
    const previous = seen.get(id);
    if (previous !== undefined) {
      throw new CodeModeError(
        "invalid_config",
        `Tools ${previous} and ${index} both have the catalog id "${id}"; give each tool of one source and owner a distinct name.`,
        { toolId: id, indexes: [previous, index] },
      );
    }
    seen.set(id, index);
    catalogued.push({ tool, source: tool.source, owner: tool.owner, name: tool.name, id });
  });
  catalogued.sort(compareCatalogOrder);
  directOnly.sort(compareCatalogOrder);

  const entries: CatalogTool[] = catalogued.map(({ tool, id }) => {
    const entry: CatalogTool = {
      id,
      name: tool.name,
      description: tool.description ?? "",
      source: tool.source,
      sourceName: tool.owner,
      tool,
    };
    if (tool.label !== undefined) entry.label = tool.label;
    return Object.freeze(entry);
  });
  const compact = entries.map(compactEntry);
  const guestPositions = entries.flatMap((entry, position) => (entry.source === "mcp" ? [] : [position]));
  const guestEntries = guestPositions.map((position) => compact[position]!);
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  const byName = new Map<string, CatalogTool[]>();
  for (const entry of entries) {
    const same = byName.get(entry.name);
    if (same === undefined) byName.set(entry.name, [entry]);
    else same.push(entry);
  }
  const countsBySource = Object.fromEntries(TOOL_SOURCES.map((source) => [source, 0])) as Record<
    ToolSource,
    number
  >;
  for (const entry of entries) countsBySource[entry.source]++;
  // Built on the first search: most runs never search, and building it costs every prepared run time.
  let index: SearchIndex | undefined;

  const catalog: ToolCatalog = {
    entries: Object.freeze(entries),
    guestEntries: Object.freeze(guestEntries),
    directOnly: Object.freeze(directOnly),
    convenienceNames: Object.freeze(convenienceNamesFor(guestEntries)),
    countsBySource: Object.freeze(countsBySource),
    search(query, searchOptions = {}) {
      if (typeof query !== "string") {
        throw new CodeModeError(
          "invalid_input",
          `tools.search expects a text query, got ${describeType(query)}.`,
        );
      }
      const limit = resultLimit(searchOptions.limit, limits);
      const includeMcp = searchOptions.includeMcp === true;
      const sources = searchOptions.sources;
      const accept = (position: number) => {
        const source = entries[position]!.source;
        return sources ? sources.includes(source) : includeMcp || source !== "mcp";
      };
      if (query.trim() === "") {
        if (!sources) return (includeMcp ? compact : guestEntries).slice(0, limit).map(copyEntry);
        return compact
          .filter((_, position) => accept(position))
          .slice(0, limit)
          .map(copyEntry);
      }
      index ??= new SearchIndex(compact);
      return index.search(query, accept, limit).map((position) => copyEntry(compact[position]!));
    },
    describe(idOrName, viewOptions = {}): DescribedTool {
      const entry = resolveTool(entries, byId, byName, idOrName, viewOptions.includeMcp === true, "describe");
      const described: DescribedTool = { ...compactEntry(entry), parameters: entry.tool.parameters };
      if (entry.tool.outputSchema !== undefined) described.outputSchema = entry.tool.outputSchema;
      return described;
    },
    resolve(idOrName, viewOptions = {}) {
      return resolveTool(entries, byId, byName, idOrName, viewOptions.includeMcp === true, "call");
    },
    get(id) {
      return byId.get(id);
    },
  };
  return Object.freeze(catalog);
}

function compactEntry(entry: CatalogTool): ToolCatalogEntry {
  const compact: ToolCatalogEntry = {
    id: entry.id,
    name: entry.name,
    description: entry.description,
    source: entry.source,
    sourceName: entry.sourceName,
  };
  if (entry.label !== undefined) compact.label = entry.label;
  return compact;
}

// Search answers are handed out; copies keep callers from editing the catalog's own entries.
function copyEntry(entry: ToolCatalogEntry): ToolCatalogEntry {
  return { ...entry };
}

function checkHostTool(tool: HostTool, index: number): void {
  const where = `Host tool ${index}`;
  if (typeof tool !== "object" || tool === null) {
    throw new CodeModeError("invalid_config", `${where} is not an object.`, { index });
  }
  if (typeof tool.name !== "string" || tool.name === "") {
    throw new CodeModeError("invalid_config", `${where} needs a non-empty string "name".`, { index });
  }
  if (!(TOOL_SOURCES as readonly string[]).includes(tool.source)) {
    throw new CodeModeError(
      "invalid_config",
      `${where} ("${tool.name}") has source ${JSON.stringify(tool.source)}; use one of ${TOOL_SOURCES.join(", ")}.`,
      { index },
    );
  }
  if (typeof tool.owner !== "string" || tool.owner === "") {
    throw new CodeModeError(
      "invalid_config",
      `${where} ("${tool.name}") needs a non-empty string "owner": the plugin id, MCP server, client app or host name.`,
      { index },
    );
  }
  if (tool.description !== undefined && typeof tool.description !== "string") {
    throw new CodeModeError("invalid_config", `${where} ("${tool.name}") has a non-string description.`, {
      index,
    });
  }
  if (tool.label !== undefined && typeof tool.label !== "string") {
    throw new CodeModeError("invalid_config", `${where} ("${tool.name}") has a non-string label.`, { index });
  }
}

type SearchLimits = { defaultLimit: number; maxLimit: number };

function searchLimits(options: ToolCatalogOptions): SearchLimits {
  const range = CODE_MODE_LIMITS.maxSearchLimit;
  const maxLimit = clampInteger(
    options.maxSearchLimit,
    range.default,
    range.min,
    range.max,
    "maxSearchLimit",
  );
  const defaultLimit = clampInteger(
    options.searchDefaultLimit,
    CODE_MODE_LIMITS.searchDefaultLimit.default,
    1,
    maxLimit,
    "searchDefaultLimit",
  );
  return { defaultLimit, maxLimit };
}

function clampInteger(value: unknown, fallback: number, min: number, max: number, field: string): number {
  if (value === undefined) return Math.min(Math.max(fallback, min), max);
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new CodeModeError(
      "invalid_config",
      `Catalog option ${field} must be a finite number, got ${describeType(value)}.`,
      {
        field,
      },
    );
  }
  return Math.min(Math.max(Math.floor(value), min), max);
}

function resultLimit(limit: unknown, limits: SearchLimits): number {
  if (limit === undefined || limit === null) return limits.defaultLimit;
  if (typeof limit !== "number" || !Number.isFinite(limit) || limit < 1) {
    throw new CodeModeError(
      "invalid_input",
      `tools.search limit must be a number from 1 to ${limits.maxLimit}, got ${typeof limit === "number" ? String(limit) : describeType(limit)}.`,
      { maxSearchLimit: limits.maxLimit },
    );
  }
  return Math.min(Math.floor(limit), limits.maxLimit);
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}
