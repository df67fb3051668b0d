import { AgentError } from "./agent-error.js";
import { declaredTools, isClientCodeMode } from "./client-code-mode.js";
import type { TurnTool } from "./turn.js";

/** What to do with a hosted tool (web search, a local shell, ...) that no cell can run. */
export type HostedToolPolicy = "drop" | "refuse";

/** How a client tool's call goes back on the wire: its own name, and the namespace it was offered in. */
export type WireName = { name: string; namespace: string };

/** A request's tools in the loop's terms: its client tools, which of them are custom, what was left out. */
export type ResponsesTools = {
  tools: TurnTool[];
  /** Custom (freeform) tools: their input is one string, carried as `{ "input": "..." }` in the run. */
  custom: Set<string>;
  /** Tools offered inside a namespace, by the name a cell calls them by (`<namespace>__<name>`). */
  namespaced: Map<string, WireName>;
  /** Hosted tools left out of the run under the `drop` policy, by type; a client's own exec and wait. */
  dropped: string[];
};

/**
 * The namespace the Responses API gives top-level function tools: a tool offered in it is called by
 * its own name, as if it were offered at the top level.
 */
const DEFAULT_NAMESPACE = "functions";

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

/** The parameters a custom tool has as a client tool: its free-text input as one string field. */
function customToolParameters(fields: Record<string, unknown>): unknown {
  const format = record(fields.format);
  const grammar =
    format.type === "grammar" && typeof format.definition === "string"
      ? ` It follows this ${String(format.syntax ?? "")} grammar:\n${format.definition}`
      : "";
  return {
    type: "object",
    properties: { input: { type: "string", description: `The tool's free-text input.${grammar}` } },
    required: ["input"],
    additionalProperties: false,
  };
}

/** The name a cell calls a namespace's tool by (the namespace's own tools keep theirs). */
export function namespacedName(namespace: string, name: string): string {
  return namespace === DEFAULT_NAMESPACE ? name : `${namespace}__${name}`;
}

/**
 * A request's tools as client tools, wherever the Responses API carries them: the `tools` array, the
 * tools of a `namespace` tool, and the tools of `additional_tools` input items. Function and custom
 * tools become client tools; hosted tools are dropped or refused by policy. A client's own code mode
 * (a custom `exec` that declares tools for its cells, see client-code-mode.ts) is replaced: its
 * declared tools become client tools, and its exec and wait are left out.
 */
export function fromResponsesTools(
  tools: unknown,
  policy: HostedToolPolicy,
  input?: unknown,
): ResponsesTools {
  const result: ResponsesTools = { tools: [], custom: new Set(), namespaced: new Map(), dropped: [] };
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) {
    throw invalid('"tools" must be an array of { type: "function", name, parameters } tools.');
  }
  const names = new Set<string>();
  const declared: Array<ReturnType<typeof declaredTools>[number]> = [];
  /** Code mode's pairs are left out where they came: the client's wait beside its exec. */
  const codeModeNamespaces = new Set<string>();
  const pending: Array<{ fields: Record<string, unknown>; where: string; namespace: string }> = [];

  const read = (list: readonly unknown[], where: string, namespace: string) => {
    list.forEach((tool, index) => {
      const fields = record(tool);
      const at = `${where}[${index}]`;
      if (fields.type === "namespace") {
        if (typeof fields.name !== "string" || !fields.name || !Array.isArray(fields.tools)) {
          throw invalid(`${at}: a namespace tool needs a name and a tools array.`);
        }
        read(fields.tools, `${at}.tools`, fields.name);
        return;
      }
      if (fields.type !== "function" && fields.type !== "custom") {
        if (policy === "drop") {
          result.dropped.push(String(fields.type));
          return;
        }
        throw invalid(
          `${at} is a ${JSON.stringify(fields.type)} tool, which no code-mode cell can run: give function or custom tools, or leave it out (the gateway drops such tools instead with agent.hostedTools "drop").`,
        );
      }
      if (fields.type === "custom" && isClientCodeMode(fields)) {
        declared.push(...declaredTools(String(fields.description)));
        codeModeNamespaces.add(namespace);
        result.dropped.push(namespacedName(namespace, "exec"));
        return;
      }
      pending.push({ fields, where: at, namespace });
    });
  };
  read(tools ?? [], "tools", DEFAULT_NAMESPACE);
  if (Array.isArray(input)) {
    input.forEach((item, index) => {
      const fields = record(item);
      if (fields.type === "additional_tools" && Array.isArray(fields.tools)) {
        read(fields.tools, `input[${index}].tools`, DEFAULT_NAMESPACE);
      }
    });
  }
  for (const { fields, where, namespace } of pending) {
    if (typeof fields.name !== "string" || !fields.name) {
      throw invalid(`${where} needs a name: { type: "function", name, parameters }.`);
    }
    if (fields.name === "wait" && codeModeNamespaces.has(namespace)) {
      result.dropped.push(namespacedName(namespace, "wait"));
      continue;
    }
    const name = namespacedName(namespace, fields.name);
    if (names.has(name)) throw invalid(`${where}: the name "${name}" is given twice.`);
    names.add(name);
    if (namespace !== DEFAULT_NAMESPACE) result.namespaced.set(name, { name: fields.name, namespace });
    if (fields.type === "custom") result.custom.add(name);
    result.tools.push({
      name,
      description: typeof fields.description === "string" ? fields.description : "",
      parameters:
        fields.type === "custom"
          ? customToolParameters(fields)
          : (fields.parameters ?? { type: "object", properties: {} }),
    });
  }
  // Declared last: a tool the client also offers itself keeps the client's own definition.
  for (const tool of declared) {
    if (names.has(tool.name)) continue;
    names.add(tool.name);
    if (tool.freeform) result.custom.add(tool.name);
    result.tools.push({
      name: tool.name,
      description: tool.description,
      parameters: tool.freeform ? customToolParameters({}) : tool.parameters,
    });
  }
  return result;
}
