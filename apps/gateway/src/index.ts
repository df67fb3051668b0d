export { type ApprovalClient, NO_APPROVAL_CLIENT } from "./approvals.js";
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
export { EXIT } from "./exit-codes.js";
export { Gateway, type GatewayOptions } from "./gateway.js";
export { BearerTokens } from "./http-auth.js";
export {
  CONVERSATION_HEADER,
  checkHttpExposure,
  type HttpServeOptions,
  type RunningHttpServer,
  serveHttp,
} from "./http-transport.js";
export { catalogView, createSessionServer, toCallToolResult } from "./mcp-front.js";
export { GATEWAY_AGENT_ID, LOCAL_PRINCIPAL, ownerContext, type RunOwner } from "./run-owner.js";
export { GatewaySession } from "./session.js";
export type { SessionHost, ToolCallRequest } from "./session-host.js";
export { serveStdio } from "./stdio-transport.js";
