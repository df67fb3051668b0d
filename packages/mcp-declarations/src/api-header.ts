import { CodeModeError, closestMatches } from "@codecell/contract";
import { sharedTypesBlock } from "./render-declarations.js";
import type { McpDeclaredServer } from "./types.js";

/**
 * The text `MCP.<server>.$api(toolName?, { schema? })` returns: the server's whole declaration file, or
 * one tool's declaration (named by its MCP name or its camelCase identifier) with the types it uses.
 * `schema: true` appends the JSON Schemas as the server sent them. An unknown tool name is an
 * `invalid_input` error that lists the closest names.
 */
export function renderApiHeader(
  server: McpDeclaredServer,
  toolName?: string,
  options: { schema?: boolean } = {},
): string {
  if (toolName === undefined || toolName === null) {
    if (!options.schema) return server.header;
    const schemas = server.tools.map((tool) => schemaSection(tool.name, tool.inputSchema, tool.outputSchema));
    return `${server.header}\n${schemas.join("\n")}`;
  }
  if (typeof toolName !== "string") {
    throw new CodeModeError(
      "invalid_input",
      `MCP.${server.identifier}.$api(toolName) takes a tool name string; got ${typeof toolName}.`,
      { server: server.name },
    );
  }
  const tool = server.tools.find(
    (candidate) => candidate.identifier === toolName || candidate.name === toolName,
  );
  if (!tool) {
    const names = server.tools.map((candidate) => candidate.identifier);
    const suggestions = closestMatches(toolName, [
      ...names,
      ...server.tools.map((candidate) => candidate.name),
    ]);
    const hint =
      suggestions.length > 0 ? ` Did you mean ${suggestions.map((s) => `"${s}"`).join(" or ")}?` : "";
    throw new CodeModeError(
      "invalid_input",
      `MCP.${server.identifier} has no tool "${toolName}".${hint} Its tools: ${names.join(", ") || "(none)"}.`,
      { server: server.name, tool: toolName, suggestions },
    );
  }
  const header = `// MCP.${server.identifier}.${tool.identifier}\ndeclare namespace MCP.${server.identifier} {\n${tool.declaration}${sharedTypesBlock(tool.declaration)}}\n`;
  if (!options.schema) return header;
  return `${header}\n${schemaSection(tool.name, tool.inputSchema, tool.outputSchema)}`;
}

function schemaSection(name: string, inputSchema: unknown, outputSchema: unknown): string {
  let text = `// JSON Schema of ${JSON.stringify(name)} input:\n${stringify(inputSchema)}\n`;
  if (outputSchema !== undefined)
    text += `// JSON Schema of ${JSON.stringify(name)} output:\n${stringify(outputSchema)}\n`;
  return text;
}

function stringify(value: unknown): string {
  try {
    return JSON.stringify(value ?? {}, null, 2) ?? "{}";
  } catch {
    return '"(this schema cannot be shown as JSON)"';
  }
}
