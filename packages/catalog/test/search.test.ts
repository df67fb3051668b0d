import { describe, expect, it } from "vitest";
import { buildToolCatalog } from "../src/build-tool-catalog.js";
import { CORE_STYLE_TOOLS, loadRealMcpTools } from "./support/real-catalogs.js";
import { expectCodeModeError, hostTool } from "./support/tools.js";

const ids = (entries: ReadonlyArray<{ id: string }>) => entries.map((entry) => entry.id);

describe("search", () => {
  const catalog = buildToolCatalog([...CORE_STYLE_TOOLS, ...loadRealMcpTools()]);

  it('finds read_file for "read local file" in the guest view', () => {
    expect(catalog.search("read local file")[0]?.id).toBe("core:host:read_file");
  });

  it.each([
    ["a typo", "wirte file", "core:host:write_file"],
    ["a prefix", "calend", "plugin:calendar:calendar_create_event"],
    ["the label", "Fetch URL", "core:host:web_fetch"],
    ["the owner in the id", "app select", "client:app:select_file"],
    ["different case", "WEB SEARCH", "core:host:web_search"],
    ["a camelCase name", "webSearch", "core:host:web_search"],
  ])("matches through %s", (_case, query, expected) => {
    expect(ids(catalog.search(query, { limit: 3 }))).toContain(expected);
  });

  it("leaves MCP entries out of the guest view and ranks them when the host asks", () => {
    expect(
      ids(catalog.search("create a github issue", { limit: 50 })).filter((id) => id.startsWith("mcp:")),
    ).toEqual([]);
    expect(catalog.search("create a github issue", { includeMcp: true })[0]?.id).toBe(
      "mcp:github:create_issue",
    );
  });

  it("ranks only the sources asked for, MCP included (the engine's API.search)", () => {
    const mcpOnly = catalog.search("create a github issue", { sources: ["mcp"], limit: 50 });
    expect(mcpOnly[0]?.id).toBe("mcp:github:create_issue");
    expect(mcpOnly.every((entry) => entry.source === "mcp")).toBe(true);
    const empty = catalog.search("", { sources: ["mcp"], limit: 2 });
    expect(ids(empty)).toEqual(ids(catalog.entries.filter((entry) => entry.source === "mcp").slice(0, 2)));
  });

  it("answers an empty query with the first entries in catalog order", () => {
    expect(ids(catalog.search("   ", { limit: 3 }))).toEqual(ids(catalog.guestEntries.slice(0, 3)));
    expect(ids(catalog.search("", { limit: 2, includeMcp: true }))).toEqual(ids(catalog.entries.slice(0, 2)));
  });

  it.each([
    ["no limit: searchDefaultLimit", {}, undefined, 8],
    ["a smaller limit", {}, 3, 3],
    ["a fractional limit, floored", {}, 2.9, 2],
    ["a limit over maxSearchLimit, clamped", {}, 500, 50],
    ["a configured default", { searchDefaultLimit: 4 }, undefined, 4],
    ["a default over a lowered max", { searchDefaultLimit: 20, maxSearchLimit: 5 }, undefined, 5],
    ["a limit over a lowered max", { maxSearchLimit: 5 }, 30, 5],
  ])("limits results: %s", (_case, options, limit, expected) => {
    const limited = buildToolCatalog([...CORE_STYLE_TOOLS, ...loadRealMcpTools()], options);
    expect(limited.search("", { limit, includeMcp: true })).toHaveLength(expected);
    const matching = limited.search("file", { limit: 50, includeMcp: true }).length;
    expect(limited.search("file", { limit, includeMcp: true })).toHaveLength(Math.min(expected, matching));
  });

  it.each([
    ["zero", 0],
    ["a negative number", -1],
    ["NaN", Number.NaN],
    ["a string", "5"],
  ])("rejects %s as a limit", (_case, limit) => {
    expectCodeModeError(
      () => catalog.search("file", { limit: limit as number }),
      "invalid_input",
      "limit must be a number from 1 to 50",
    );
  });

  it("rejects a non-text query", () => {
    expectCodeModeError(
      () => catalog.search(42 as unknown as string),
      "invalid_input",
      "text query",
      "number",
    );
  });

  it("returns nothing for a query of stop words only or with no match", () => {
    expect(catalog.search("the of and")).toEqual([]);
    expect(catalog.search("zzqxv")).toEqual([]);
  });

  it("breaks score ties by catalog order, whatever the input order", () => {
    const twins = ["b_twin", "a_twin", "c_twin"].map((name) =>
      hostTool("plugin", "twins", name, { description: "Frobnicate the widget." }),
    );
    for (const input of [twins, [...twins].reverse()]) {
      expect(ids(buildToolCatalog(input).search("frobnicate widget"))).toEqual([
        "plugin:twins:a_twin",
        "plugin:twins:b_twin",
        "plugin:twins:c_twin",
      ]);
    }
  });

  it("hands out copies, so a caller cannot edit the catalog", () => {
    const first = catalog.search("read local file")[0]!;
    first.description = "changed";
    expect(catalog.search("read local file")[0]!.description).not.toBe("changed");
  });
});
