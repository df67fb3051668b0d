export type { McpHttpServerConfig, McpServerConfig, McpStdioServerConfig } from "./config.js";
export {
  createMcpConnector,
  type McpCallOptions,
  type McpChangeEvent,
  type McpConnector,
  type McpConnectorDiagnostic,
  type McpConnectorOptions,
  type McpLogMessage,
  type McpPromptListing,
  type McpResourceListing,
  type McpServerStatus,
} from "./connector.js";
export {
  idAtEnd,
  MAX_DOWNSTREAM_DEPTH,
  MAX_DOWNSTREAM_MESSAGE_BYTES,
  scanJsonLine,
} from "./guarded-read-buffer.js";
