// The engine's public API. The published entry (dist/bundle/index.js) is written from this list by
// scripts/bundle-engine.mjs: it starts the sandbox's first worker before this module loads.

// The trajectory's wire shapes are the contract's, re-exported here as the engine exports them.
export {
  TRAJECTORY_FORMAT,
  type TrajectoryEntry,
  type TrajectoryExport,
  type TruncatedInput,
} from "@codecell/contract";
export { CodeModeEngine, createCodeModeEngine } from "./engine.js";
export { type McpCellView, type McpSearchHit, mcpCellView } from "./mcp-search.js";
export {
  assertCodeModePayload,
  EXEC_TOOL_NAME,
  execDescription,
  WAIT_DESCRIPTION,
  WAIT_TOOL_NAME,
} from "./model-surface.js";
export { activeTraceHeaders, type ModelCallSpan, type TracingOptions, traceModelCall } from "./tracing.js";
export { DEFAULT_TRAJECTORY_LIMITS, type TrajectoryLimits } from "./trajectory.js";
export { importTrajectory, trajectoryTree } from "./trajectory-import.js";
export type {
  CodeModeEngineOptions,
  ControlCall,
  ControlCallEvent,
  DebugFields,
  EngineObserver,
  EngineStats,
  ExecHookMetadata,
  McpServerRequest,
  ModelTool,
  NestedCallEvent,
  NestedCallVia,
  NestedToolCall,
  PreparedRun,
  PrepareRunOptions,
  RunContext,
  RunProgress,
  SnapshotIoEvent,
  ToolExecutor,
  ToolProgress,
} from "./types.js";
