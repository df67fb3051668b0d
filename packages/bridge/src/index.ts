export { isErrorData, MAX_ERROR_MESSAGE_LENGTH, MAX_ERROR_NAME_LENGTH, toErrorData } from "./error-data.js";
export {
  type JsonText,
  type JsonTextOptions,
  parseJsonText,
  toJsonText,
  toJsonValue,
} from "./json-adapter.js";
export { exceedsJsonDepth, MAX_BRIDGE_DEPTH } from "./json-depth.js";
export { parseWorkerToHostMessage, type WorkerToHostMessage } from "./protocol.js";
export { RequestTable } from "./request-table.js";
export {
  countsOnPort,
  createSharedChannelBuffer,
  isSharedChannelBuffer,
  SHARED_SLOT_BYTES,
  SharedChannel,
} from "./shared-channel.js";
export {
  type CompiledWasmModule,
  type GuestSurface,
  type HostRequest,
  type HostRequestBody,
  type HostRequestKind,
  type HostToWorkerMessage,
  isHostRequest,
  MCP_OPERATIONS,
  type McpOperation,
  ProtocolError,
  parseHostRequestBody,
  parseHostToWorkerMessage,
  type SandboxLimits,
  type SettleItem,
  STORE_OPERATIONS,
  type StoreOperation,
  takesToolCallSlot,
} from "./worker-protocol.js";
