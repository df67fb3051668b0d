import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildToolCatalog } from "@codecell/catalog";
import { createCodeModeNamespaceRuntime } from "@codecell/namespaces";
import { afterEach, describe, expect, it } from "vitest";
import { type LoadedPlugin, loadPlugin } from "../../src/plugins/load-plugins.js";

const dir = mkdtempSync(join(tmpdir(), "codecell-plugins-"));
const namespacesImport = JSON.stringify(import.meta.resolve("@codecell/namespaces"));

function pluginFile(name: string, body: string): string {
  const file = join(dir, name);
  writeFileSync(file, `import { createCodeModeNamespaceTool } from ${namespacesImport};\n${body}`);
  return file;
}

const tool = (name: string) =>
  `{ name: "${name}", description: "d", parameters: { type: "object" }, execute: (input) => ({ echoed: input }) }`;
const namespace = (id: string, globalName: string, toolName: string) =>
  `{ id: "${id}", globalName: "${globalName}", description: "d", requiredToolNames: ["${toolName}"],
     createScope: () => ({ run: createCodeModeNamespaceTool("${toolName}") }) }`;

function visibleNamespaces(loaded: LoadedPlugin): string[] {
  return createCodeModeNamespaceRuntime({ runId: "r" }, buildToolCatalog(loaded.hostTools)).namespaces.map(
    (ns) => ns.globalName,
  );
}

const loaded: LoadedPlugin[] = [];
afterEach(async () => {
  for (const plugin of loaded.splice(0)) await plugin.unload();
});

describe("loadPlugin", () => {
  it("loads a factory, catalogues its tools as plugin tools and registers its namespace", async () => {
    const module = pluginFile(
      "good.mjs",
      `export function createPlugin({ options }) {
         return { id: "good", tools: [${tool("good_run")}], namespaces: [${namespace("good-ns", "Good", "good_run")}],
                  description: JSON.stringify(options) };
       }`,
    );
    const plugin = await loadPlugin({ entry: "./good.mjs", module, options: { a: 1 } }, dir, new Set());
    loaded.push(plugin);
    expect(plugin.plugin.description).toBe('{"a":1}');
    expect(plugin.hostTools).toEqual([
      { name: "good_run", description: "d", parameters: { type: "object" }, source: "plugin", owner: "good" },
    ]);
    expect(visibleNamespaces(plugin)).toEqual(["Good"]);
    await expect(
      plugin
        .tool("good_run")
        ?.execute({ x: 1 }, { signal: AbortSignal.timeout(1000), sessionId: "s", progress: () => {} }),
    ).toEqual({
      echoed: { x: 1 },
    });
  });

  it("clears the namespaces when unloaded", async () => {
    const module = pluginFile(
      "unload.mjs",
      `export default { id: "unload", tools: [${tool("u_run")}], namespaces: [${namespace("u-ns", "Unloaded", "u_run")}] };`,
    );
    const plugin = await loadPlugin({ entry: "./unload.mjs", module, options: null }, dir, new Set());
    expect(visibleNamespaces(plugin)).toEqual(["Unloaded"]);
    await plugin.unload();
    expect(visibleNamespaces(plugin)).toEqual([]);
  });

  it("clears what a half-loaded plugin registered when a later namespace fails", async () => {
    const module = pluginFile(
      "half.mjs",
      `export const plugin = { id: "half", tools: [${tool("h_run")}],
         namespaces: [${namespace("half-ok", "HalfOk", "h_run")}, ${namespace("half-bad", "JSON", "h_run")}] };`,
    );
    await expect(loadPlugin({ entry: "./half.mjs", module, options: null }, dir, new Set())).rejects.toThrow(
      /Plugin "\.\/half\.mjs" failed to load: .*JSON/,
    );
    const runtime = createCodeModeNamespaceRuntime(
      { runId: "r" },
      buildToolCatalog([
        { name: "h_run", description: "d", parameters: {}, source: "plugin", owner: "half" },
      ]),
    );
    expect(runtime.namespaces).toEqual([]);
  });

  const broken: Array<[string, string, RegExp]> = [
    ["no export", "export const nothing = 1;", /exports neither "createPlugin"/],
    ["a bad id", `export default { id: "Bad Id", tools: [] };`, /"id" must be lower-case/],
    [
      "a tool without execute",
      `export default { id: "x", tools: [{ name: "t", description: "d", parameters: {} }] };`,
      /tools\[0\]\.execute must be a function/,
    ],
    [
      "a duplicated tool",
      `export default { id: "x", tools: [${tool("t")}, ${tool("t")}] };`,
      /"t" is used twice/,
    ],
    ["a throwing factory", `export function createPlugin() { throw new Error("no token"); }`, /no token/],
  ];
  it.each(broken)("refuses a plugin with %s, naming the problem", async (_label, body, message) => {
    const module = pluginFile(`broken-${Math.random().toString(36).slice(2)}.mjs`, body);
    await expect(loadPlugin({ entry: "p", module, options: null }, dir, new Set())).rejects.toThrow(message);
  });

  it("refuses a second plugin with a taken id", async () => {
    const module = pluginFile("dup.mjs", `export default { id: "dup", tools: [] };`);
    await expect(loadPlugin({ entry: "d", module, options: null }, dir, new Set(["dup"]))).rejects.toThrow(
      /already uses the id "dup"/,
    );
  });

  it("refuses hooks it does not know and a before_tool_call that is not a function, naming each", async () => {
    const module = pluginFile(
      "bad-hooks.mjs",
      `export const plugin = { id: "hooks", tools: [${tool("t")}], hooks: { before_tool_call: 5, after_tool_call() {} } };`,
    );
    await expect(loadPlugin({ entry: "h", module, options: null }, dir, new Set())).rejects.toThrow(
      /hooks\.before_tool_call must be a function.*hooks\.after_tool_call is not a hook the gateway knows/,
    );
  });
});
