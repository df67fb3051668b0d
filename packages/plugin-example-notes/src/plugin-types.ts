import type {
  CodecellPlugin as CodecellPluginContract,
  PluginFactory as PluginFactoryContract,
} from "@codecell/contract";
import type { CodeModeNamespaceRegistration } from "@codecell/namespaces";

// The plugin contract lives in `@codecell/contract`, the one the gateway checks plugins against; here
// it is bound to the namespace registrations of `@codecell/namespaces`, which this plugin gives cells.

export type {
  BeforeToolCallDecision,
  BeforeToolCallEvent,
  PluginHooks,
  PluginSetup,
  PluginTool,
  PluginToolContext,
} from "@codecell/contract";

/** The object a plugin module hands the gateway, with `@codecell/namespaces` registrations. */
export type CodecellPlugin = CodecellPluginContract<CodeModeNamespaceRegistration>;

/** A module's `createPlugin` export: called once per gateway with the plugin's settings. */
export type PluginFactory = PluginFactoryContract<CodeModeNamespaceRegistration>;
