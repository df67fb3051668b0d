// The sandbox's early start first, and alone: it starts compiling quickjs.wasm and booting the first
// worker thread as it is evaluated. An ES module is evaluated only once every module of its static
// graph has been loaded, so were the engine's ~70 modules imported statically here, the worker would
// start only after all of them; loading them with a dynamic import instead lets the worker boot (tens
// of ms of CPU, on the other core) while they load. The exports below are the same values, bound
// once that import finishes, before any importer of this module runs (top-level await).
import "@codecell/sandbox/worker-start";
import type * as api from "./engine-api.js";

const engine = await import("./engine-api.js");

// Typed as declared there (a destructured literal constant would widen to string).
export const CodeModeEngine: typeof api.CodeModeEngine = engine.CodeModeEngine;
export const createCodeModeEngine: typeof api.createCodeModeEngine = engine.createCodeModeEngine;
export const mcpCellView: typeof api.mcpCellView = engine.mcpCellView;
export const assertCodeModePayload: typeof api.assertCodeModePayload = engine.assertCodeModePayload;
export const EXEC_TOOL_NAME: typeof api.EXEC_TOOL_NAME = engine.EXEC_TOOL_NAME;
export const execDescription: typeof api.execDescription = engine.execDescription;
export const WAIT_DESCRIPTION: typeof api.WAIT_DESCRIPTION = engine.WAIT_DESCRIPTION;
export const WAIT_TOOL_NAME: typeof api.WAIT_TOOL_NAME = engine.WAIT_TOOL_NAME;
export const DEFAULT_TRAJECTORY_LIMITS: typeof api.DEFAULT_TRAJECTORY_LIMITS =
  engine.DEFAULT_TRAJECTORY_LIMITS;
export const importTrajectory: typeof api.importTrajectory = engine.importTrajectory;
export const TRAJECTORY_FORMAT: typeof api.TRAJECTORY_FORMAT = engine.TRAJECTORY_FORMAT;
export const trajectoryTree: typeof api.trajectoryTree = engine.trajectoryTree;
export const traceModelCall: typeof api.traceModelCall = engine.traceModelCall;
export const activeTraceHeaders: typeof api.activeTraceHeaders = engine.activeTraceHeaders;
/** The engine class, as a type (the value above is the class itself). */
export type CodeModeEngine = import("./engine.js").CodeModeEngine;
export type { McpCellView, McpSearchHit } from "./mcp-search.js";
export type { ModelCallSpan, TracingOptions } from "./tracing.js";
export type {
  TrajectoryEntry,
  TrajectoryExport,
  TrajectoryLimits,
  TruncatedInput,
} from "./trajectory.js";
export type {
  CodeModeEngineOptions,
  ControlCall,
  ControlCallEvent,
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
