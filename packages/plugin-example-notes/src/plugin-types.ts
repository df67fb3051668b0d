import type { JsonValue } from "@codecell/contract";
import type { CodeModeNamespaceRegistration } from "@codecell/namespaces";

/** What a plugin tool's `execute` receives besides its input. */
export type PluginToolContext = {
  /** Aborted when the code-mode run (or the MCP request) that made the call goes away. */
  signal: AbortSignal;
  /** The gateway session the call belongs to. */
  sessionId: string;
};

/** One tool a plugin contributes; it enters the hidden catalog as `plugin:<pluginId>:<name>`. */
export type PluginTool = {
  name: string;
  label?: string;
  description: string;
  /** JSON Schema of the input object. */
  parameters: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  /** Runs the tool. Throw to fail the call: the guest sees a catchable error with your message. */
  execute(input: JsonValue, context: PluginToolContext): unknown;
};

/**
 * The object a plugin module hands the gateway. The gateway registers `namespaces` under `id` with
 * `@codecell/namespaces` and clears them again when the plugin is unloaded or fails to load.
 */
export type CodecellPlugin = {
  id: string;
  description?: string;
  tools: PluginTool[];
  namespaces?: CodeModeNamespaceRegistration[];
  /** Called when the gateway stops or unloads the plugin. */
  close?(): void | Promise<void>;
};

/** What a plugin factory receives from the gateway that loads it. */
export type PluginSetup = {
  /** The `options` value written next to the plugin in the config file (`null` when absent). */
  options: JsonValue;
  /** The absolute path of the folder the config file lives in. */
  configDir: string;
};

/** A module's `createPlugin` export: called once per gateway with the plugin's settings. */
export type PluginFactory = (setup: PluginSetup) => CodecellPlugin | Promise<CodecellPlugin>;
