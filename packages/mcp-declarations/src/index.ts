export { type ApiFileInfo, type ApiFileTable, createApiFileTable } from "./api-file-table.js";
export { renderApiHeader } from "./api-header.js";
export { isPlainIdentifier, RESERVED_TOOL_IDENTIFIERS, toCamelCase } from "./identifiers.js";
export { renderMcpDeclarations } from "./render-declarations.js";
export type {
  McpApiFile,
  McpDeclarations,
  McpDeclaredServer,
  McpDeclaredTool,
  McpServerDescription,
  McpToolDefinition,
  RenderOptions,
} from "./types.js";
