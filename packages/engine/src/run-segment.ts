// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file is one segment's own state: the abort of the exec or wait call (the run's abort, or the
// control call's own signal), its progress sink with the counts it reports, and the sink where the
// outcomes of the segment's calls go (to the driver's ready queue while it drives the VM).

import { setMaxListeners } from "node:events";
import type { ReadyQueue } from "./drive-segment.js";
import type { InflightCalls, OutcomeSink } from "./inflight-calls.js";
import type { ResultShapes } from "./result-shapes.js";
import type { ControlCall, RunProgress } from "./types.js";

/**
 * One exec or wait segment: its abort signal, the nested calls it started that are still running, and
 * its progress sink with the counts it reports.
 */
export type Segment = {
  signal: AbortSignal;
  /** Set just before `signal` aborts (see SegmentAbort): the hot path reads this, not the signal. */
  aborted: boolean;
  /** A nested call of this segment was handed out of the host: suspend once idle (see SegmentAbort). */
  handedOut: boolean;
  release(): void;
  /** Present or not, the field is there: every segment has the same shape. */
  progress: ((event: RunProgress) => void) | undefined;
  counts: { started: number; settled: number };
};

/**
 * The abort of one exec or wait segment: the whole run's abort (`runSignal`), or the control call's own
 * cancellation, while the segment runs. Released when it ends, so calls still pending in a waiting run
 * outlive the request that started them (they end with the run, through the in-flight table).
 */
export function openSegment(runSignal: AbortSignal, call: ControlCall, inflight: InflightCalls): Segment {
  const controller = new AbortController();
  // The driver and the run listen for it; with the control call's own signal there can be several.
  setMaxListeners(0, controller.signal);
  const sources = [runSignal, ...(call.signal ? [call.signal] : [])];
  // The only way the segment's signal aborts, so `segment.aborted` reads as `signal.aborted` does.
  const onAbort = () => {
    segment.aborted = true;
    controller.abort();
  };
  let open = true;
  const listener = call.onProgress;
  const segment: Segment = {
    signal: controller.signal,
    aborted: false,
    handedOut: false,
    counts: { started: 0, settled: 0 },
    release: () => {
      open = false;
      for (const source of sources) source.removeEventListener("abort", onAbort);
    },
    // Progress reaches the host only while this call runs; a listener that throws cannot break the run.
    progress: listener
      ? (event: RunProgress) => {
          if (!open) return;
          try {
            listener(event);
          } catch {
            // The host's progress listener failed: progress is advisory, and the run goes on without it.
          }
        }
      : undefined,
  };
  // One listener aborts every nested call the segment started and has not settled (a listener per
  // call cost more than the call itself in a loop of quick calls).
  controller.signal.addEventListener(
    "abort",
    () => inflight.abortOwnedBy(segment, "The code-mode run was aborted."),
    { once: true },
  );
  for (const source of sources) {
    if (source.aborted) onAbort();
    else source.addEventListener("abort", onAbort, { once: true });
  }
  return segment;
}

/**
 * Where the in-flight table hands outcomes while this segment drives the run: into the ready queue,
 * and into the books of the segment that made the call (its abort set, the shapes of results for
 * failure hints, its progress counts). A call an earlier segment made is only delivered.
 */
export function segmentSink(ready: ReadyQueue, segment: Segment, shapes?: ResultShapes): OutcomeSink {
  return (requestId, outcome, call) => {
    ready.push(requestId, outcome, call.toolId);
    if (call.owner !== segment) return;
    if (shapes && outcome.ok) shapes.record(call.toolId, outcome.value);
    if (segment.progress) {
      const { counts } = segment;
      counts.settled++;
      segment.progress({ kind: "calls", ...counts, pending: counts.started - counts.settled });
    }
  };
}
