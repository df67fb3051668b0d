// The records of one exec or wait call: its GenAI tool span, and at its end the counters, observer event, span, trajectory entry and debug line.
import type { CodeModeResult } from "@codecell/contract";
import { cellOf } from "./control-input.js";
import { type EngineShared, observe } from "./engine-shared.js";
import { EXEC_TOOL_NAME } from "./model-surface.js";
import { spanJson, startSpan, type TracedSpan } from "./tracing.js";
import type { TrajectoryHandle } from "./trajectory.js";
import type { ControlCall, PrepareRunOptions } from "./types.js";

/** What `finishControl` needs of the call it ends, besides its result. */
export type ControlEnd = {
  control: TrajectoryHandle;
  tool: "exec" | "wait";
  toolCallId: string;
  span: TracedSpan | null;
  startedAt: number;
  /** The run id known before the result (a waiting result names its own). */
  knownRunId: string | undefined;
};

/**
 * The exec or wait call's span, after the GenAI conventions for a tool execution (`execute_tool exec`),
 * under whatever context the host made active (its incoming request's, which may carry a client's
 * trace). Null unless a tracer provider is registered and the sampler kept it.
 */
export function controlSpan(
  engine: EngineShared,
  context: PrepareRunOptions["context"],
  tool: "exec" | "wait",
  call: ControlCall,
  runId: string | undefined,
  input: unknown,
): TracedSpan | null {
  const span = startSpan(`execute_tool ${tool}`, {
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": tool,
      "gen_ai.tool.call.id": call.toolCallId,
      "gen_ai.tool.type": "function",
      "gen_ai.conversation.id": context.sessionId,
      "gen_ai.agent.id": context.agentId,
      "codecell.agent_run.id": context.runId,
      "codecell.run.id": runId,
    },
  });
  if (span !== null && engine.tracing.recordInputs) {
    span.set({
      "gen_ai.tool.call.arguments": spanJson(
        tool === EXEC_TOOL_NAME ? engine.redactInput(EXEC_TOOL_NAME, cellOf(input)) : input,
      ),
    });
  }
  return span;
}

/** Ends an exec or wait call's records (counters, observer, span, trajectory, debug line) with its result. */
export function finishControl(
  engine: EngineShared,
  sessionId: string,
  ended: ControlEnd,
  result: CodeModeResult,
): CodeModeResult {
  const { control, tool, toolCallId, span, startedAt, knownRunId } = ended;
  engine.countResult(result);
  const code = result.status === "failed" ? (result.code ?? "guest_error") : undefined;
  const runId = result.status === "waiting" ? result.runId : knownRunId;
  if (engine.observer?.controlEnded !== undefined) {
    observe(engine, "controlEnded", {
      tool,
      status: result.status,
      ...(code !== undefined ? { code } : {}),
      durationMs: Date.now() - startedAt,
      nestedCalls: result.telemetry.nested.calls,
      ...(runId !== undefined ? { runId } : {}),
      sessionId,
      ...(span !== null ? { traceId: span.span.spanContext().traceId } : {}),
    });
  }
  if (span !== null) {
    const { nested } = result.telemetry;
    span.end(
      {
        "codecell.status": result.status,
        "codecell.run.id": result.status === "waiting" ? result.runId : undefined,
        "codecell.waiting.reason": result.status === "waiting" ? result.reason : undefined,
        "codecell.pending_calls":
          result.status === "waiting" ? (result.pendingToolCalls?.length ?? 0) : undefined,
        "codecell.nested.calls": nested.calls,
        "codecell.nested.failed_calls": nested.failedCalls,
        "codecell.nested.searches": nested.searches,
        "codecell.nested.describes": nested.describes,
        "codecell.output.entries": result.output?.length ?? 0,
        "gen_ai.tool.call.result":
          result.status === "completed" && engine.tracing.recordOutputs ? spanJson(result.value) : undefined,
      },
      code,
      result.status === "failed" ? result.error.slice(0, 500) : undefined,
    );
  }
  if (result.status === "waiting") {
    engine.trajectory.annotate(control, {
      codeModeRunId: result.runId,
      ...(result.yieldReason !== undefined ? { yieldReason: result.yieldReason } : {}),
    });
  }
  engine.trajectory.end(
    control,
    result.status,
    result.status === "failed" ? { code: result.code, error: result.error } : undefined,
  );
  engine.debug?.(
    `${tool} ${toolCallId}: ${result.status}${result.status === "failed" ? ` (${result.code ?? "guest error"}: ${result.error.slice(0, 200)})` : ""}; nested calls ${result.telemetry.nested.calls}, searches ${result.telemetry.nested.searches}, describes ${result.telemetry.nested.describes}`,
    { ...(runId !== undefined ? { runId } : {}), sessionId, toolCallId },
  );
  return result;
}
