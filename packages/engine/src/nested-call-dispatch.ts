// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file is where the VM's host requests enter the machine while a segment is driven: a yield is
// noted, a catalog question (search, describe) is answered straight into the ready queue, and anything
// else is started as a call (nested-calls) and placed in the run's in-flight table (inflight-calls).

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
  if (
    request.kind === "call" ||
    request.kind === "namespace" ||
    (request.kind === "mcp" && request.op === "call")
  ) {
    stats.nestedCalls++;
  }
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
