import { createRequire } from "node:module";
import type { ToolCatalogEntry } from "@codecell/contract";
import type MiniSearch from "minisearch";
import { expandQuery, termOf, tokenize } from "./text-analysis.js";

type IndexedDocument = { order: number; name: string; label: string; description: string; id: string };

// Name and label are what a tool is; the description says it at length; the id adds source and owner
// ("github", "playwright") so a query can name the server.
const FIELD_BOOSTS = { name: 3, label: 2, description: 1, id: 1 };
const SYNONYM_WEIGHT = 0.4;

let miniSearchClass: typeof MiniSearch | undefined;

/**
 * MiniSearch, loaded on the first search: most runs never search, and a first exec should not pay for
 * the library. The load is synchronous (MiniSearch ships a CommonJS build), so `search` stays so too.
 */
function loadMiniSearch(): typeof MiniSearch {
  miniSearchClass ??= createRequire(import.meta.url)("minisearch") as typeof MiniSearch;
  return miniSearchClass;
}

/** A relevance index over catalog entries, ranked with BM25 plus prefix and fuzzy term matching. */
export class SearchIndex {
  private readonly index: MiniSearch<IndexedDocument>;

  constructor(entries: readonly ToolCatalogEntry[]) {
    const MiniSearchClass = loadMiniSearch();
    this.index = new MiniSearchClass<IndexedDocument>({
      idField: "order",
      fields: ["name", "label", "description", "id"],
      tokenize,
      processTerm: termOf,
    });
    this.index.addAll(
      entries.map((entry, order) => ({
        order,
        name: entry.name,
        label: entry.label ?? "",
        description: entry.description,
        id: entry.id,
      })),
    );
  }

  /**
   * Catalog positions of the best matches, best first; equal scores keep catalog order so the same
   * query over the same catalog always answers the same list.
   */
  search(query: string, accept: (order: number) => boolean, limit: number): number[] {
    const terms = expandQuery(query, SYNONYM_WEIGHT);
    if (terms.length === 0) return [];
    const weights = new Map(terms.map(({ term, weight }) => [term, weight]));
    const results = this.index.search(terms.map(({ term }) => term).join(" "), {
      tokenize: (text) => text.split(" "),
      processTerm: (term) => term,
      boost: FIELD_BOOSTS,
      boostTerm: (term) => weights.get(term) ?? 1,
      prefix: (term) => term.length >= 3,
      fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
      weights: { fuzzy: 0.3, prefix: 0.5 },
      combineWith: "OR",
      filter: (result) => accept(result.id as number),
    });
    results.sort((a, b) => b.score - a.score || (a.id as number) - (b.id as number));
    return results.slice(0, limit).map((result) => result.id as number);
  }
}
