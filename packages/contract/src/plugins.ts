import type { JsonValue } from "./json.js";

// The plugin contract: what a plugin module hands the gateway, and what the gateway hands its tools and
// hooks. The gateway checks plugin objects against it and the example plugin is written against it, so
// the two cannot drift. Namespaces are `@codecell/namespaces` registrations; the contract imports
// nothing of ours, so their type is a parameter (the gateway and plugin authors pass
// `CodeModeNamespaceRegistration`).

/** What a plugin tool's `execute` receives besides its input. */
export type PluginToolContext = {
  /** Aborted when the code-mode run (or the MCP request) that made the call goes away. */
  signal: AbortSignal;
  /** The gateway session (the MCP session) the call came through. */
  sessionId: string;
  /** Reports progress while the tool runs; it reaches the MCP client as notifications/progress. */
  progress(update: { progress: number; total?: number; message?: string }): void;
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
 * What a `before_tool_call` hook sees: every tool call the gateway runs, nested in a cell or direct,
 * after policy and before approval, and the model's own code-mode `exec` calls. A code-mode exec has
 * `toolKind: "code_mode_exec"` (and `toolInputKind` when the language is known), `toolId`/`toolName`
 * `"exec"`, `source` `"code_mode"`: a policy tells it from the shell tool `core:codecell:exec` by
 * `toolKind`, not by name.
 */
export type BeforeToolCallEvent = {
  /** Catalog id, e.g. `core:codecell:write_file`. */
  toolId: string;
  toolName: string;
  source: string;
  owner: string;
  /** A copy: change it through the decision's `input`, not in place. */
  input: JsonValue;
  /** How the call was reached: from a cell (`tools.call`, `mcp`, `namespace`) or directly (code mode off). */
  via: "tools.call" | "mcp" | "namespace" | "direct";
  toolKind?: "code_mode_exec";
  toolInputKind?: "javascript" | "typescript";
  /** The MCP session the call came through. */
  sessionId: string;
  /**
   * The run: its owner's session and, for nested calls, the runId the model was given
   * (`codeModeRunId`) and the exec/wait call it ran under (`parentToolCallId`).
   */
  run: {
    agentId: string;
    sessionKey: string;
    sessionId: string;
    runId: string;
    codeModeRunId?: string;
    parentToolCallId?: string;
  };
};

/**
 * Nothing: the call goes on. `{ block: true, reason }`: it is not made, and the cell sees
 * `nested_tool_failed` with the reason. `{ input }`: it goes on with this input. Throwing blocks too.
 */
export type BeforeToolCallDecision = { block: true; reason: string } | { input: JsonValue } | undefined;

export type PluginHooks = {
  before_tool_call?(event: BeforeToolCallEvent): BeforeToolCallDecision | Promise<BeforeToolCallDecision>;
};

/**
 * The object a plugin module hands the gateway. The gateway registers `namespaces` under `id` with
 * `@codecell/namespaces` and clears them again when the plugin is unloaded or fails to load.
 * `Namespace` is `CodeModeNamespaceRegistration` from `@codecell/namespaces`.
 */
export type CodecellPlugin<Namespace = unknown> = {
  id: string;
  description?: string;
  tools: PluginTool[];
  namespaces?: Namespace[];
  /** Hooks the gateway runs on every tool call, in plugin load order, before approval. */
  hooks?: PluginHooks;
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
export type PluginFactory<Namespace = unknown> = (
  setup: PluginSetup,
) => CodecellPlugin<Namespace> | Promise<CodecellPlugin<Namespace>>;
