import type { CodecellPlugin } from "@codecell/contract";
import type { CodeModeNamespaceRegistration } from "@codecell/namespaces";

/**
 * What a plugin module provides: the plugin contract of `@codecell/contract` (which the example plugin,
 * `@codecell/plugin-example-notes`, is written against too), with `@codecell/namespaces` registrations.
 */
export type GatewayPlugin = CodecellPlugin<CodeModeNamespaceRegistration>;

const ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** Checks a plugin object and lists every problem, so a plugin author sees them all at once. */
export function pluginShapeProblems(value: unknown): string[] {
  if (value === null || typeof value !== "object") return ["it is not an object"];
  const plugin = value as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof plugin.id !== "string" || !ID.test(plugin.id)) {
    problems.push(`"id" must be lower-case letters, digits, "_" or "-" (got ${JSON.stringify(plugin.id)})`);
  }
  if (!Array.isArray(plugin.tools)) {
    problems.push('"tools" must be an array');
  } else {
    const seen = new Set<string>();
    for (const [index, tool] of (plugin.tools as Array<Record<string, unknown> | null>).entries()) {
      const where = `tools[${index}]`;
      if (tool === null || typeof tool !== "object") {
        problems.push(`${where} is not an object`);
        continue;
      }
      if (typeof tool.name !== "string" || !TOOL_NAME.test(tool.name)) {
        problems.push(`${where}.name must be an identifier-like name (got ${JSON.stringify(tool.name)})`);
      } else if (seen.has(tool.name)) {
        problems.push(`${where}.name "${tool.name}" is used twice`);
      } else seen.add(tool.name);
      if (typeof tool.description !== "string" || tool.description.trim() === "") {
        problems.push(`${where}.description must be a non-empty string`);
      }
      if (tool.parameters === null || typeof tool.parameters !== "object") {
        problems.push(`${where}.parameters must be a JSON Schema object`);
      }
      if (typeof tool.execute !== "function") problems.push(`${where}.execute must be a function`);
    }
  }
  if (plugin.namespaces !== undefined && !Array.isArray(plugin.namespaces)) {
    problems.push('"namespaces" must be an array of namespace registrations');
  }
  if (plugin.hooks !== undefined) {
    const hooks = plugin.hooks as Record<string, unknown> | null;
    if (hooks === null || typeof hooks !== "object")
      problems.push('"hooks" must be an object of hook functions');
    else {
      for (const [name, hook] of Object.entries(hooks)) {
        if (name !== "before_tool_call")
          problems.push(`hooks.${name} is not a hook the gateway knows (before_tool_call)`);
        else if (typeof hook !== "function") problems.push(`hooks.${name} must be a function`);
      }
    }
  }
  if (plugin.close !== undefined && typeof plugin.close !== "function")
    problems.push('"close" must be a function');
  return problems;
}
