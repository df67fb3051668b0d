export { EXIT } from "./cli/exit-codes.js";
export { type ConfigProblem, formatProblem } from "./config/config-problem.js";
export {
  DEFAULT_CONFIG_FILE,
  DEFAULT_HTTP_SETTINGS,
  type GatewayConfig,
  type HttpSettings,
  type LoadedConfig,
  loadGatewayConfig,
  resolveGatewayConfig,
} from "./config/load-config.js";
export { createCoreTools, SHELL_TOOL_ID } from "./core-tools/core-tools.js";
export { Gateway, type GatewayOptions } from "./gateway.js";
export { BearerTokens } from "./http/http-auth.js";
export {
  CONVERSATION_HEADER,
  checkHttpExposure,
  type HttpServeOptions,
  type RunningHttpServer,
  serveHttp,
} from "./http/http-transport.js";
export { type ApprovalClient, NO_APPROVAL_CLIENT } from "./mcp/approvals.js";
export { catalogView, createSessionServer, toCallToolResult } from "./mcp/mcp-front.js";
export { serveStdio } from "./mcp/stdio-transport.js";
export { GATEWAY_AGENT_ID, LOCAL_PRINCIPAL, ownerContext, type RunOwner } from "./sessions/run-owner.js";
export { GatewaySession } from "./sessions/session.js";
export type { SessionHost, ToolCallRequest } from "./sessions/session-host.js";
