// Dispatching the sandbox's host requests of one segment: yields noted, catalog answers queued, nested calls started in the in-flight table.
import type { HostRequest } from "@codecell/bridge";
import type { CodeModeTelemetry } from "@codecell/contract";
import type { ReadyQueue } from "./drive-segment.js";
import { InflightCall, type InflightCalls } from "./inflight-calls.js";
import { type RequestParent, type RequestScope, startHostRequest } from "./nested-calls.js";
import type { Segment } from "./run-segment.js";
import type { EngineStats } from "./types.js";

/** What one segment's host requests are dispatched into, made once per segment. */
export type SegmentRequests = {
  readonly scope: RequestScope;
  readonly inflight: InflightCalls;
  readonly ready: ReadyQueue;
  readonly yieldIds: Set<string>;
  readonly parent: RequestParent;
  readonly telemetry: CodeModeTelemetry;
  readonly segment: Segment;
  readonly stats: EngineStats;
};

export function dispatchHostRequest(request: HostRequest, into: SegmentRequests): void {
  const { scope, inflight, ready, yieldIds, parent, telemetry, segment } = into;
  if (request.kind === "yield") {
    yieldIds.add(request.requestId);
    return;
  }
  const started = startHostRequest(request, scope, parent, telemetry);
  const { stats } = into;
  if (request.kind === "search") stats.nestedSearches++;
  else if (request.kind === "describe") stats.nestedDescribes++;
  if (!(started instanceof InflightCall)) {
    // Answered from the catalog; the driver delivers it (never from inside the sandbox's callback).
    ready.push(request.requestId, started);
    return;
  }
  if (request.kind !== "mcp" || request.op === "call") stats.nestedCalls++;
  if (segment.aborted) started.abort(new Error("The code-mode run was aborted."));
  if (segment.progress) {
    const { counts } = segment;
    counts.started++;
    segment.progress({ kind: "calls", ...counts, pending: counts.started - counts.settled });
  }
  // Runs now, or waits in order for one of the run's maxPendingToolCalls slots; the outcome comes
  // back through the sink, with this segment as the call's owner.
  inflight.add(started, segment);
}
