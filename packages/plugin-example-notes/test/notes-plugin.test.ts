import { buildToolCatalog } from "@codecell/catalog";
import { CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import {
  clearCodeModeNamespacesForPlugin,
  createCodeModeNamespaceRuntime,
  registerCodeModeNamespaceForPlugin,
} from "@codecell/namespaces";
import { afterEach, describe, expect, it } from "vitest";
import { createNotesPlugin, createPlugin, NOTES_PLUGIN_ID } from "../src/notes-plugin.js";

const context = { signal: new AbortController().signal, sessionId: "s1", progress: () => {} };

function run(plugin: ReturnType<typeof createNotesPlugin>, name: string, input: JsonValue): unknown {
  const tool = plugin.tools.find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.execute(input, context);
}

function hostTools(plugin: ReturnType<typeof createNotesPlugin>): HostTool[] {
  return plugin.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    source: "plugin",
    owner: plugin.id,
  }));
}

describe("notes tools", () => {
  it("adds, reads, lists, searches and deletes", () => {
    const plugin = createNotesPlugin([]);
    const added = run(plugin, "notes_add", { title: "Groceries", body: "milk and eggs", tags: ["Home"] }) as {
      id: string;
    };
    expect(added).toMatchObject({ id: "note-1", title: "Groceries", tags: ["home"] });
    run(plugin, "notes_add", { title: "Milk prices", body: "compare shops" });
    expect(run(plugin, "notes_get", { id: "note-1" })).toMatchObject({ body: "milk and eggs" });
    expect(run(plugin, "notes_list", { tag: "home" })).toEqual([
      expect.objectContaining({ id: "note-1", title: "Groceries" }),
    ]);
    const found = run(plugin, "notes_search", { query: "milk" }) as Array<{ id: string; score: number }>;
    // The title match ranks above the body match.
    expect(found.map((note) => note.id)).toEqual(["note-2", "note-1"]);
    expect(run(plugin, "notes_delete", { id: "note-2" })).toEqual({ deleted: "note-2" });
    expect(plugin.store.size).toBe(1);
  });

  const refusals: Array<[string, string, JsonValue, RegExp]> = [
    ["missing title", "notes_add", { body: "x" }, /needs "title"/],
    ["blank title", "notes_add", { title: "  ", body: "x" }, /non-empty title/],
    ["tags not strings", "notes_add", { title: "t", body: "b", tags: [1] }, /array of strings/],
    ["not an object", "notes_get", "note-1", /one object argument/],
    [
      "unknown id with suggestion",
      "notes_get",
      { id: "note-11" },
      /no note "note-11"\. Did you mean "note-1"/,
    ],
    ["bad limit", "notes_list", { limit: 0 }, /positive integer/],
    ["query not a string", "notes_search", { query: 3 }, /must be a string/],
    ["delete unknown", "notes_delete", { id: "nope" }, /no note "nope"/],
  ];
  it.each(refusals)("refuses %s with invalid_input", (_label, tool, input, message) => {
    const plugin = createNotesPlugin([{ title: "first", body: "b" }]);
    let caught: unknown;
    try {
      run(plugin, tool, input);
    } catch (error) {
      caught = error;
    }
    expect(CodeModeError.is(caught)).toBe(true);
    expect((caught as CodeModeError).code).toBe("invalid_input");
    expect((caught as Error).message).toMatch(message);
  });

  it("takes a seed from options and rejects a malformed one", async () => {
    const plugin = await createPlugin({ options: { seed: [{ title: "a", body: "b" }] }, configDir: "/" });
    expect(plugin.tools).toHaveLength(5);
    expect(run(plugin as ReturnType<typeof createNotesPlugin>, "notes_list", {})).toHaveLength(1);
    expect(() => createPlugin({ options: { seed: [{ title: 1 }] }, configDir: "/" })).toThrow(
      /"seed" must be/,
    );
    const defaults = (await createPlugin({ options: null, configDir: "/" })) as ReturnType<
      typeof createNotesPlugin
    >;
    expect(defaults.store.size).toBe(2);
  });
});

describe("Notes namespace", () => {
  afterEach(() => clearCodeModeNamespacesForPlugin(NOTES_PLUGIN_ID));

  it("is visible with the plugin's tools and resolves calls to them", () => {
    const plugin = createNotesPlugin();
    for (const registration of plugin.namespaces ?? [])
      registerCodeModeNamespaceForPlugin(plugin.id, registration);
    const runtime = createCodeModeNamespaceRuntime({ runId: "r" }, buildToolCatalog(hostTools(plugin)));
    expect(runtime.namespaces.map((ns) => ns.globalName)).toEqual(["Notes"]);
    expect(runtime.promptText).toContain("Notes.search(query, limit?)");
    expect(runtime.resolveCall("notes", "get", ["note-2"])).toMatchObject({
      toolId: "plugin:notes:notes_get",
      input: { id: "note-2" },
    });
    expect(runtime.resolveCall("notes", "search", ["release"]).input).toEqual({ query: "release" });
    expect(runtime.resolveCall("notes", "list", []).input).toEqual({});
  });

  it("stays hidden when policy removes one of its tools", () => {
    const plugin = createNotesPlugin();
    for (const registration of plugin.namespaces ?? [])
      registerCodeModeNamespaceForPlugin(plugin.id, registration);
    const catalog = buildToolCatalog(hostTools(plugin), { deny: ["notes_delete"] });
    expect(createCodeModeNamespaceRuntime({ runId: "r" }, catalog).namespaces).toEqual([]);
  });
});

describe("readOnly: a before_tool_call hook", () => {
  const event = (toolName: string, owner = NOTES_PLUGIN_ID) => ({
    toolId: `plugin:${owner}:${toolName}`,
    toolName,
    source: "plugin",
    owner,
    input: {},
    via: "tools.call" as const,
    sessionId: "s1",
    run: { agentId: "a", sessionKey: "k", sessionId: "s", runId: "r" },
  });

  it("blocks the notebook's writing tools with a reason and lets everything else through", async () => {
    const plugin = await createPlugin({ options: { readOnly: true }, configDir: "." });
    const hook = plugin.hooks?.before_tool_call;
    expect(hook).toBeTypeOf("function");
    expect(await hook!(event("notes_add"))).toEqual({
      block: true,
      reason: "the notebook is read-only (notes plugin option readOnly)",
    });
    expect(await hook!(event("notes_delete"))).toMatchObject({ block: true });
    expect(await hook!(event("notes_list"))).toBeUndefined();
    expect(await hook!(event("notes_add", "other-plugin"))).toBeUndefined();
  });

  it("has no hook without the option", async () => {
    expect((await createPlugin({ options: null, configDir: "." })).hooks).toBeUndefined();
  });
});
