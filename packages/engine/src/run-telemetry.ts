import { emptyReferenceArray } from "@codecell/bridge/v8-shapes";
import type { ToolCatalog } from "@codecell/catalog";
import {
  type CodeModeErrorCode,
  type CodeModeTelemetry,
  emptyTelemetry,
  type LimitKind,
} from "@codecell/contract";

const limitKindOf: Partial<Record<CodeModeErrorCode, LimitKind>> = {
  timeout: "timeout",
  memory_limit_exceeded: "memory",
  output_limit_exceeded: "output",
  snapshot_limit_exceeded: "snapshot",
  too_many_pending_tool_calls: "pendingToolCalls",
};

/** Telemetry of one code-mode run, carried across its exec and waits (and through the store). */
export function newRunTelemetry(
  visibleToolNames: readonly string[],
  catalog: ToolCatalog,
): CodeModeTelemetry {
  const telemetry = emptyTelemetry();
  // Every nested call pushes its tool id here (see emptyReferenceArray).
  telemetry.nested.toolIds = emptyReferenceArray();
  telemetry.visibleToolNames = [...visibleToolNames];
  telemetry.catalog = { size: catalog.entries.length, bySource: { ...catalog.countsBySource } };
  return telemetry;
}

export function countLimitFailure(telemetry: CodeModeTelemetry, code: CodeModeErrorCode | undefined): void {
  const kind = code ? limitKindOf[code] : undefined;
  if (kind) telemetry.limitFailures[kind]++;
}

/** Keeps the per-result list of nested tool ids bounded, however many calls a cell makes. */
export const MAX_TELEMETRY_TOOL_IDS = 1_000;

export function recordNestedToolId(telemetry: CodeModeTelemetry, toolId: string): void {
  if (telemetry.nested.toolIds.length < MAX_TELEMETRY_TOOL_IDS) telemetry.nested.toolIds.push(toolId);
}
