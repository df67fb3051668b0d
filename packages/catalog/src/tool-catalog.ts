import type { HostTool, ToolCatalogEntry, ToolCatalogEntryWithSchema, ToolSource } from "@codecell/contract";

/** A catalog entry together with the host tool it stands for (host side only; never sent to a guest). */
export type CatalogTool = ToolCatalogEntry & { sourceName: string; tool: HostTool };

/** What `describe` answers: the compact entry plus the input schema, and the output schema if declared. */
export type DescribedTool = ToolCatalogEntryWithSchema & { outputSchema?: unknown };

export type ToolCatalogOptions = {
  /** Ids or names, `*` globs allowed. When given, only matching tools are catalogued (empty: none). */
  allow?: readonly string[];
  /** Ids or names, `*` globs allowed. Wins over `allow`. */
  deny?: readonly string[];
  /** Result count of a search without a limit. Default 8, clamped to `maxSearchLimit`. */
  searchDefaultLimit?: number;
  /** Largest result count a search may ask for. Default 50, range 1..50. */
  maxSearchLimit?: number;
};

export type CatalogViewOptions = {
  /** Also consider MCP entries. Guest views leave this off: guests reach MCP through `MCP.<server>`. */
  includeMcp?: boolean;
};

export type CatalogSearchOptions = CatalogViewOptions & {
  limit?: number;
  /** Only entries of these sources (MCP included when listed, whatever `includeMcp` says). */
  sources?: readonly ToolSource[];
};

/** The run-scoped hidden catalog: built once per run from the host's effective tools. */
export interface ToolCatalog {
  /** Every catalogued tool, MCP included, in catalog order. */
  readonly entries: readonly CatalogTool[];
  /** The `ALL_TOOLS` view: compact entries without MCP tools and without schemas. */
  readonly guestEntries: readonly ToolCatalogEntry[];
  /** Tools marked `directOnly`: passed to the model as they are, never catalogued. */
  readonly directOnly: readonly HostTool[];
  /** `tools.<name>` shortcuts for guest-visible tools whose safe name is unique and not reserved. */
  readonly convenienceNames: ReadonlyArray<{ name: string; toolId: string; aliases?: string[] }>;
  /** Catalogued tools per source. */
  readonly countsBySource: Readonly<Record<ToolSource, number>>;
  /** Ranked search over name, label, description and id; an empty query lists entries in catalog order. */
  search(query: string, options?: CatalogSearchOptions): ToolCatalogEntry[];
  /** The entry with its schema; throws `invalid_input` for an unknown or ambiguous id or name. */
  describe(idOrName: string, options?: CatalogViewOptions): DescribedTool;
  /** The catalogued tool an id or unique name stands for, under the same rules as `describe`. */
  resolve(idOrName: string, options?: CatalogViewOptions): CatalogTool;
  /** Exact id lookup over every source. */
  get(id: string): CatalogTool | undefined;
}
