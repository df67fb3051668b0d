import {
  CodeModeError,
  execInputJsonSchema,
  markCodeModeControlTool,
  waitInputJsonSchema,
} from "@codecell/contract";
import type { ModelTool } from "./types.js";

export const EXEC_TOOL_NAME = "exec";
export const WAIT_TOOL_NAME = "wait";

export type ExecDescriptionParts = {
  /** Identifiers under `MCP` of the visible servers; empty when no MCP server is visible. */
  mcpServers: readonly string[];
  /** Description and prompt of each visible namespace, already joined. */
  namespacePrompt: string;
  typescript: boolean;
  /** `tools.codeMode.typecheck`; "strict" is the one a model must know of (its cells can be refused). */
  typecheck?: "off" | "warn" | "strict";
  /** `tools.codeMode.images`: the cell may show images with image(source). */
  images?: boolean;
};

// Every sentence here is paid for on every model request, so it teaches only what a model cannot
// discover from inside a cell (where ALL_TOOLS, tools.describe and API.read answer the rest).
export function execDescription(parts: ExecDescriptionParts): string {
  const lines = [
    `Run a short ${parts.typescript ? 'JavaScript or TypeScript (language:"typescript") ' : "JavaScript "}program in a sandbox to use tools. The code is an async function body: await works, and \`return\` gives the result (JSON).`,
    "Inside the code:",
    `- ALL_TOOLS: [{id, name, description, source}] for every tool${parts.mcpServers.length > 0 ? " except MCP tools (those are only under MCP)" : ""}.`,
    "- await tools.search(query, {limit}) ranks those tools; await tools.describe(id) gives the input schema; await tools.call(id, input) runs one; tools.<name>(input) is a shortcut for unique names.",
  ];
  if (parts.mcpServers.length > 0) {
    lines.push(
      `- MCP servers (${parts.mcpServers.join(", ")}): await MCP.<server>.<tool>({...}); await API.search(query) ranks MCP tools; API.read("mcp/<server>.d.ts") has their signatures.`,
    );
  }
  lines.push(
    "- text(value) and json(value) add output; await yield_control(reason) pauses the run.",
    "- await store(key, value) keeps JSON for later cells; await load(key) gets it (undefined if none); store.keys(), store.delete(key).",
    'Run independent calls together with Promise.all. There is no import, require, fetch, timer, file system or network. A result with status "waiting" continues with wait({runId}).',
  );
  if (parts.images) {
    lines.push("- image(source) shows you an image: a data URL or a tool result's image content.");
  }
  if (parts.typecheck === "strict") {
    lines.push(
      "Cells are type-checked against these APIs before they run: a cell with type errors does not run and fails (invalid_input) with diagnostics [{line, column, message, accepts}]; fix those lines and exec again.",
    );
  }
  if (parts.namespacePrompt) lines.push(parts.namespacePrompt);
  return lines.join("\n");
}

export const WAIT_DESCRIPTION =
  'Continue a code-mode run whose exec or wait result had status "waiting": pass its runId. Returns the same result shape as exec.';

/** The exec input schema offers only the languages the config enables. */
function execInputSchemaFor(parts: ExecDescriptionParts): unknown {
  if (parts.typescript) return execInputJsonSchema;
  const schema = structuredClone(execInputJsonSchema) as unknown as {
    properties: { code: { description: string }; language: { enum: string[]; description: string } };
  };
  schema.properties.code.description = "The JavaScript cell to run.";
  schema.properties.language.enum = ["javascript"];
  schema.properties.language.description = 'The cell language: only "javascript" is enabled.';
  return schema;
}

export function codeModeModelTools(parts: ExecDescriptionParts): ModelTool[] {
  // Marked, so a host that feeds the model surface back in as tools never catalogues them.
  return [
    markCodeModeControlTool({
      name: EXEC_TOOL_NAME,
      description: execDescription(parts),
      inputSchema: execInputSchemaFor(parts),
    }),
    markCodeModeControlTool({
      name: WAIT_TOOL_NAME,
      description: WAIT_DESCRIPTION,
      inputSchema: waitInputJsonSchema,
    }),
  ];
}

/**
 * For hosts to call on the final provider payload, after their own payload hooks: when code mode is
 * active the model must see exactly exec and wait (plus the run's directOnly tools). Anything else
 * means a hook re-exposed hidden tools, and the request must not be sent.
 */
export function assertCodeModePayload(
  toolNames: readonly string[],
  allowedDirectOnly: readonly string[] = [],
): void {
  const expected = new Set([EXEC_TOOL_NAME, WAIT_TOOL_NAME, ...allowedDirectOnly]);
  const unexpected = toolNames.filter((name) => !expected.has(name));
  const missing = [EXEC_TOOL_NAME, WAIT_TOOL_NAME].filter((name) => !toolNames.includes(name));
  const duplicated = toolNames.filter((name, index) => toolNames.indexOf(name) !== index);
  if (unexpected.length || missing.length || duplicated.length) {
    const problems = [
      unexpected.length ? `unexpected tools ${unexpected.join(", ")}` : "",
      missing.length ? `missing ${missing.join(", ")}` : "",
      duplicated.length ? `duplicated ${duplicated.join(", ")}` : "",
    ].filter(Boolean);
    throw new CodeModeError(
      "internal_error",
      `Code mode is active but the provider payload does not hold exactly exec and wait: ${problems.join("; ")}. Refusing to send it.`,
      { toolNames: [...toolNames] },
    );
  }
}
