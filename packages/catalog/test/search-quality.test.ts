import { describe, expect, it } from "vitest";
import { buildToolCatalog } from "../src/build-tool-catalog.js";
import { CORE_STYLE_TOOLS, loadRealMcpTools } from "./support/real-catalogs.js";
import { SEARCH_QUALITY_QUERIES } from "./support/search-queries.js";

// Real `tools/list` answers of eight MCP servers plus core-style host tools: the host-side search
// (MCP included) must put a right tool first or in the top three for queries a model would write.
describe("search quality over real MCP catalogs", () => {
  const catalog = buildToolCatalog([...loadRealMcpTools(), ...CORE_STYLE_TOOLS]);
  const outcomes = SEARCH_QUALITY_QUERIES.map(({ query, expected }) => {
    const ids = catalog.search(query, { limit: 3, includeMcp: true }).map((entry) => entry.id);
    return {
      query,
      expected,
      ids,
      top1: expected.includes(ids[0] ?? ""),
      top3: ids.some((id) => expected.includes(id)),
    };
  });
  const top1 = outcomes.filter((outcome) => outcome.top1).length / outcomes.length;
  const top3 = outcomes.filter((outcome) => outcome.top3).length / outcomes.length;

  it("covers at least 40 queries over the real catalog", () => {
    expect(SEARCH_QUALITY_QUERIES.length).toBeGreaterThanOrEqual(40);
    expect(catalog.countsBySource.mcp).toBe(97);
    for (const { expected } of SEARCH_QUALITY_QUERIES) {
      for (const id of expected) expect(catalog.get(id), `expected id ${id} exists`).toBeDefined();
    }
  });

  it("reaches top-3 accuracy of at least 90% and top-1 of at least 75%", () => {
    const misses = outcomes.filter((outcome) => !outcome.top3);
    console.log(
      `search quality: ${outcomes.length} queries, top-1 ${(top1 * 100).toFixed(1)}%, top-3 ${(top3 * 100).toFixed(1)}%` +
        misses.map((miss) => `\n  miss: "${miss.query}" -> ${miss.ids.join(", ")}`).join(""),
    );
    expect(top3).toBeGreaterThanOrEqual(0.9);
    expect(top1).toBeGreaterThanOrEqual(0.75);
  });
});
