import type { JsonValue } from "@codecell/contract";
import type { CodeModeNamespaceRegistration } from "@codecell/namespaces";

/**
 * What a plugin module provides (the example plugin, `@codecell/plugin-example-notes`, exports the same
 * types for authors). Kept structural here so the gateway depends on no plugin package's types.
 */
export type GatewayPluginTool = {
  name: string;
  label?: string;
  description: string;
  parameters: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  execute(
    input: JsonValue,
    context: {
      signal: AbortSignal;
      sessionId: string;
      /** Reports progress while the tool runs; it reaches the MCP client as notifications/progress. */
      progress(update: { progress: number; total?: number; message?: string }): void;
    },
  ): unknown;
};

/**
 * What a `before_tool_call` hook sees: every tool call the gateway runs, nested in a cell or direct,
 * after policy and before approval, and the model's own code-mode `exec` calls. `run` is the run
 * context (`codeModeRunId` and `parentToolCallId` are there for nested calls: the runId the model was
 * given and the exec/wait call the call ran under). A code-mode exec has `toolKind: "code_mode_exec"`
 * (and `toolInputKind` when the language is known), `toolId`/`toolName` `"exec"`, `source`
 * `"code_mode"`: a policy tells it from the shell tool `core:codecell:exec` by `toolKind`, not by name.
 */
export type BeforeToolCallEvent = {
  toolId: string;
  toolName: string;
  source: string;
  owner: string;
  input: JsonValue;
  via: "tools.call" | "mcp" | "namespace" | "direct";
  toolKind?: "code_mode_exec";
  toolInputKind?: "javascript" | "typescript";
  /** The MCP session the call came through. */
  sessionId: string;
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
 * A hook's answer: nothing (go on), `{ block: true, reason }` (the call is not made; the cell sees
 * `nested_tool_failed` with the reason), or `{ input }` (the call goes on with this input instead).
 */
export type BeforeToolCallDecision = { block: true; reason: string } | { input: JsonValue } | undefined;

export type GatewayPluginHooks = {
  before_tool_call?(event: BeforeToolCallEvent): BeforeToolCallDecision | Promise<BeforeToolCallDecision>;
};

export type GatewayPlugin = {
  id: string;
  description?: string;
  tools: GatewayPluginTool[];
  namespaces?: CodeModeNamespaceRegistration[];
  hooks?: GatewayPluginHooks;
  close?(): void | Promise<void>;
};

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
