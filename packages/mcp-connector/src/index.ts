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
  type McpStartOptions,
} from "./connector.js";
export { guardedFetch } from "./guarded-fetch.js";
export {
  idAtEnd,
  MAX_DOWNSTREAM_DEPTH,
  MAX_DOWNSTREAM_MESSAGE_BYTES,
  scanJsonLine,
} from "./guarded-read-buffer.js";
export { killSpawnedServers, spawnedServerPids } from "./spawned-processes.js";
