// First, so the sandbox package is evaluated before the rest of the engine: it starts compiling
// quickjs.wasm and booting a worker as it loads, which then overlaps the rest of this import.
import "@codecell/sandbox";

export { CodeModeEngine, createCodeModeEngine } from "./engine.js";
export { type McpCellView, type McpSearchHit, mcpCellView } from "./mcp-search.js";
export {
  assertCodeModePayload,
  EXEC_TOOL_NAME,
  execDescription,
  WAIT_DESCRIPTION,
  WAIT_TOOL_NAME,
} from "./model-surface.js";
export {
  DEFAULT_TRAJECTORY_LIMITS,
  importTrajectory,
  TRAJECTORY_FORMAT,
  type TrajectoryEntry,
  type TrajectoryExport,
  type TrajectoryLimits,
  type TruncatedInput,
  trajectoryTree,
} from "./trajectory.js";
export type {
  CodeModeEngineOptions,
  ControlCall,
  EngineStats,
  ExecHookMetadata,
  McpServerRequest,
  ModelTool,
  NestedCallVia,
  NestedToolCall,
  PreparedRun,
  PrepareRunOptions,
  RunContext,
  RunProgress,
  ToolExecutor,
  ToolProgress,
} from "./types.js";
