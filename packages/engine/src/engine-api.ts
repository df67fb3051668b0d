// The engine's values, loaded by index.ts after the sandbox has started its first worker (see there).
export { CodeModeEngine, createCodeModeEngine } from "./engine.js";
export { mcpCellView } from "./mcp-search.js";
export {
  assertCodeModePayload,
  EXEC_TOOL_NAME,
  execDescription,
  WAIT_DESCRIPTION,
  WAIT_TOOL_NAME,
} from "./model-surface.js";
export { activeTraceHeaders, traceModelCall } from "./tracing.js";
export {
  DEFAULT_TRAJECTORY_LIMITS,
  importTrajectory,
  TRAJECTORY_FORMAT,
  trajectoryTree,
} from "./trajectory.js";
