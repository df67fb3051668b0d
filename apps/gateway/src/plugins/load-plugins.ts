import { pathToFileURL } from "node:url";
import { CodeModeError, type HostTool, type PluginTool } from "@codecell/contract";
import { clearCodeModeNamespacesForPlugin, registerCodeModeNamespaceForPlugin } from "@codecell/namespaces";
import type { PluginSpec } from "../config/load-config.js";
import { type GatewayPlugin, pluginShapeProblems } from "./plugin-shape.js";

export type LoadedPlugin = {
  plugin: GatewayPlugin;
  entry: string;
  hostTools: HostTool[];
  tool(name: string): PluginTool | undefined;
  /** Clears the plugin's namespaces and lets it release what it holds. */
  unload(): Promise<void>;
};

async function instantiate(spec: PluginSpec, configDir: string): Promise<unknown> {
  const module = (await import(pathToFileURL(spec.module).href)) as Record<string, unknown>;
  const factory = module.createPlugin ?? module.default ?? module.plugin;
  if (typeof factory === "function") return await factory({ options: spec.options, configDir });
  if (factory && typeof factory === "object") return factory;
  throw new Error('the module exports neither "createPlugin" (a factory), a default export, nor "plugin"');
}

/**
 * Loads one plugin: imports it, checks its shape, registers its namespaces under its id. Any failure
 * clears whatever namespaces it had registered, so a half-loaded plugin leaves nothing behind.
 */
export async function loadPlugin(
  spec: PluginSpec,
  configDir: string,
  taken: ReadonlySet<string>,
): Promise<LoadedPlugin> {
  let pluginId: string | undefined;
  try {
    const value = await instantiate(spec, configDir);
    const problems = pluginShapeProblems(value);
    if (problems.length) throw new Error(problems.join("; "));
    const plugin = value as GatewayPlugin;
    if (taken.has(plugin.id)) throw new Error(`another plugin already uses the id "${plugin.id}"`);
    pluginId = plugin.id;
    for (const registration of plugin.namespaces ?? [])
      registerCodeModeNamespaceForPlugin(plugin.id, registration);
    const tools = new Map(plugin.tools.map((tool) => [tool.name, tool]));
    return {
      plugin,
      entry: spec.entry,
      hostTools: plugin.tools.map((tool) => ({
        name: tool.name,
        ...(tool.label ? { label: tool.label } : {}),
        description: tool.description,
        parameters: tool.parameters,
        ...(tool.outputSchema ? { outputSchema: tool.outputSchema } : {}),
        source: "plugin",
        owner: plugin.id,
      })),
      tool: (name) => tools.get(name),
      async unload() {
        clearCodeModeNamespacesForPlugin(plugin.id);
        await plugin.close?.();
      },
    };
  } catch (error) {
    if (pluginId) clearCodeModeNamespacesForPlugin(pluginId);
    throw new CodeModeError(
      "invalid_config",
      `Plugin "${spec.entry}" failed to load: ${(error as Error).message}. Fix the plugin or remove it from "plugins".`,
      { plugin: spec.entry },
      { cause: error },
    );
  }
}
