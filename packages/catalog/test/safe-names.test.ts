import type { HostTool } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { buildToolCatalog } from "../src/build-tool-catalog.js";
import { normalizeToolName } from "../src/safe-names.js";
import { hostTool } from "./support/tools.js";

describe("normalizeToolName", () => {
  it.each([
    ["web_search", "web_search"],
    ["get-sum", "get_sum"],
    ["resolve-library-id", "resolve_library_id"],
    ["browser.click", "browser_click"],
    ["3d_render", "_3d_render"],
    ["$helper", "$helper"],
    ["größe", "gr__e"],
    ["camelCase", "camelCase"],
  ])("%s -> %s", (name, safe) => {
    expect(normalizeToolName(name)).toBe(safe);
  });
});

describe("convenience names", () => {
  const names = (tools: HostTool[]) => buildToolCatalog(tools).convenienceNames;

  it("offers a unique safe name per guest-visible tool", () => {
    expect(names([hostTool("core", "host", "web_search"), hostTool("plugin", "calc", "get-sum")])).toEqual([
      {
        name: "web_search",
        toolId: "core:host:web_search",
        aliases: ["webSearch", "WebSearch", "websearch", "WEB_SEARCH"],
      },
      { name: "get_sum", toolId: "plugin:calc:get-sum", aliases: ["getSum", "GetSum", "getsum", "GET_SUM"] },
    ]);
  });

  it("gives no alias a spelling that another tool has or could mean", () => {
    const catalog = buildToolCatalog([
      hostTool("core", "host", "getItem"),
      hostTool("core", "host", "get_item"),
      hostTool("core", "host", "list_items"),
      hostTool("core", "host", "search_files"),
    ]);
    const aliases = Object.fromEntries(catalog.convenienceNames.map((entry) => [entry.name, entry.aliases]));
    expect(aliases).toEqual({
      getItem: undefined,
      get_item: undefined,
      list_items: ["listItems", "ListItems", "listitems", "LIST_ITEMS"],
      search_files: ["searchFiles", "SearchFiles", "searchfiles", "SEARCH_FILES"],
    });
  });

  it.each([
    ["the same name from two owners", ["core:host:read_file", "plugin:fs:read_file"]],
    ["two names that normalize alike", ["core:host:get-sum", "core:host:get_sum"]],
    ["a dotted and an underscored name", ["core:host:a.b", "client:app:a_b"]],
  ])("drops both tools of a collision: %s", (_case, toolIds) => {
    const tools = toolIds.map((id) => {
      const [source, owner, name] = id.split(":") as [HostTool["source"], string, string];
      return hostTool(source, owner, name);
    });
    const catalog = buildToolCatalog(tools);
    expect(catalog.convenienceNames).toEqual([]);
    for (const id of toolIds) expect(catalog.resolve(id).id).toBe(id);
  });

  it.each([
    "search",
    "describe",
    "call",
    "tools",
    "MCP",
    "API",
    "namespaces",
    "text",
    "json",
    "yield_control",
    "ALL_TOOLS",
    "then",
    "constructor",
    "__proto__",
    "toString",
    "hasOwnProperty",
    "delete",
    "class",
    "await",
    "undefined",
    "eval",
    "__codecell_bridge",
  ])("never offers %s", (name) => {
    expect(names([hostTool("plugin", "p", name)])).toEqual([]);
  });

  it("does not offer MCP tools, and MCP tools do not make guest names collide", () => {
    const catalog = buildToolCatalog([
      hostTool("mcp", "github", "create_issue"),
      hostTool("plugin", "gh", "create_issue"),
    ]);
    expect(catalog.convenienceNames).toEqual([
      {
        name: "create_issue",
        toolId: "plugin:gh:create_issue",
        aliases: ["createIssue", "CreateIssue", "createissue", "CREATE_ISSUE"],
      },
    ]);
  });
});
