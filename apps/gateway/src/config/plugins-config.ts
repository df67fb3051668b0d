import type { JsonValue } from "@codecell/contract";
import type { ConfigProblem } from "./config-problem.js";
import { pluginEntrySchema } from "./config-schema.js";
import { resolveModule } from "./resolve-module.js";

/** A `plugins` entry: the module as written, the file it resolved to, and its options. */
export type PluginSpec = { entry: string; module: string; options: JsonValue };

/**
 * The `plugins` section with each module resolved. Read from the unvalidated input, so one `check` run
 * reports a missing plugin even when other parts failed; an entry of the wrong shape is the schema's
 * problem, skipped here.
 */
export function resolvePlugins(
  raw: unknown,
  configDir: string,
  file: string,
  problems: ConfigProblem[],
): PluginSpec[] {
  const plugins: PluginSpec[] = [];
  if (!Array.isArray(raw)) return plugins;
  for (const [index, item] of raw.entries()) {
    const entry = pluginEntrySchema().safeParse(item);
    if (!entry.success) continue;
    const { data } = entry;
    const spec = typeof data === "string" ? data : data.module;
    try {
      plugins.push({
        entry: spec,
        module: resolveModule(spec, configDir),
        options: (typeof data === "string" ? null : (data.options ?? null)) as JsonValue,
      });
    } catch (error) {
      problems.push({
        file,
        path: `plugins.${index}${typeof data === "string" ? "" : ".module"}`,
        message: `cannot find plugin module "${spec}" (${(error as Error).message.split("\n")[0]}). Use a path relative to the config file ("./my-plugin.js") or an installed package name.`,
      });
    }
  }
  return plugins;
}
