// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file ends a segment: a completed or failed cell becomes the run's result; a waiting one is
// stored (its snapshot, its pending calls and yields, the outcomes already in) and the model gets a
// waiting result with the runId to wait on.

import type { CodeModeResult, CodeModeTelemetry, JsonValue } from "@codecell/contract";
import { CodeModeError } from "@codecell/contract";
import type { ClaimedRun, RunScope } from "@codecell/snapshot-store";
import type { ReadyQueue, SegmentEnd } from "./drive-segment.js";
import { type EngineShared, observe } from "./engine-shared.js";
import type { InflightCalls } from "./inflight-calls.js";
import { failedResult, failureResult } from "./run-results.js";
import { startSpan, type TracedSpan } from "./tracing.js";
import type { ControlCall } from "./types.js";

/**
 * The engine's own part of a stored run. `memoryLimitBytes` is the limit its VM ran under, so a wait under
 * a tighter config refuses it (restore-limits.ts).
 */
/** How long an ended run's answer waits for its cancelled calls to leave their tools (see InflightCalls.stopped). */
const STOP_GRACE_MS = 2_000;

export type RunHostState = { yieldRequestIds: string[]; memoryLimitBytes?: number };

export async function settleSegment(
  engine: EngineShared,
  runScope: Omit<RunScope, "toolCallId">,
  end: SegmentEnd,
  state: {
    /** The run id the model has (or is about to get); the engine's in-flight calls are kept under it. */
    runId: string;
    inflight: InflightCalls;
    ready: ReadyQueue;
    yieldIds: Set<string>;
    telemetry: CodeModeTelemetry;
    startedAt: number;
    claim: ClaimedRun | null;
    call: ControlCall;
    span: TracedSpan | null;
  },
): Promise<CodeModeResult> {
  const store = await engine.store;
  const { telemetry, claim, inflight } = state;
  state.inflight.detach();
  if (end.type !== "waiting") {
    engine.inflight.delete(state.runId);
    inflight.abortAll("The code-mode run ended.");
    await inflight.stopped(STOP_GRACE_MS);
    if (claim) {
      // A finish that fails (the store away) leaves the record claimed until its claim lease ends and
      // the sweep expires it; the run's result is what the model must hear either way.
      await store.finish(claim, end.type).catch(() => {});
      telemetry.snapshotEvents.push({ event: "deleted", runId: claim.runId });
    }
    telemetry.durationMs = Date.now() - state.startedAt;
    if (end.type === "completed") {
      return {
        status: "completed",
        value: end.value,
        ...(end.output.length ? { output: end.output } : {}),
        telemetry,
      };
    }
    return failedResult(end.code, end.message, telemetry, end.output, state.startedAt);
  }

  // Outcomes that reached the segment while the VM was being snapshotted were not delivered: they
  // are stored with the run, or the next wait would report those calls as lost.
  const undelivered = new Map(
    state.ready.drain().map(([requestId, outcome, toolId]) => [requestId, { outcome, toolId }]),
  );
  const queuedIds = new Set<string>();
  const pendingCalls = end.pending
    .filter((request) => request.kind !== "yield")
    .map((request) => {
      const call = inflight.get(request.requestId);
      const left = undelivered.get(request.requestId);
      const outcome = call?.outcome ?? left?.outcome;
      // Still owed by the process that ran it before (another replica): kept as the store had it.
      const owed = claim?.pendingCalls.find((pending) => pending.callId === request.requestId);
      if (call?.queued && !outcome) queuedIds.add(request.requestId);
      return {
        callId: request.requestId,
        toolId: call?.toolId ?? left?.toolId ?? owed?.toolId ?? request.kind,
        startedAt: call
          ? new Date(call.startedAtMs).toISOString()
          : (owed?.startedAt ?? new Date().toISOString()),
        ...(outcome ? { outcome: outcome as never } : {}),
      };
    });
  const yields = end.pending.filter((request) => request.kind === "yield");
  const yieldRequestIds = yields.map((request) => request.requestId);
  // The guest's own words for the pause; bounded, since guest code chooses them.
  const yieldReason = yields.map((request) => request.reason).find((reason) => reason !== undefined);
  const hostState: RunHostState = { yieldRequestIds, memoryLimitBytes: engine.config.memoryLimitBytes };
  telemetry.durationMs = Date.now() - state.startedAt;
  const payload = {
    snapshot: end.snapshot,
    pendingCalls,
    output: end.output,
    telemetry,
    hostState: hostState as unknown as JsonValue,
  };
  let runId: string;
  const suspend = state.span
    ? startSpan("codecell.snapshot.suspend", {
        parent: state.span,
        attributes: {
          "codecell.pending_calls": pendingCalls.length,
          "codecell.waiting.reason": end.reason,
        },
      })
    : null;
  try {
    const stored = claim
      ? await store.resuspend(claim, payload)
      : await store.suspend({
          ...payload,
          runId: state.runId,
          scope: { ...runScope, toolCallId: state.call.toolCallId },
        });
    runId = stored.runId;
    telemetry.snapshotEvents.push({ event: "stored", runId, bytes: stored.bytes });
    suspend?.end({
      "codecell.run.id": runId,
      "codecell.snapshot.bytes": end.snapshot.byteLength,
      "codecell.snapshot.stored_bytes": stored.bytes,
    });
    observe(engine, "snapshot", { kind: "suspend", bytes: stored.bytes });
  } catch (error) {
    suspend?.end(undefined, CodeModeError.is(error) ? error.code : "internal_error");
    engine.inflight.delete(state.runId);
    inflight.abortAll("The code-mode run could not be stored.");
    // The store already failed once here: a finish that fails too is left to the claim lease and the
    // sweep, and the storing error is what the model hears.
    if (claim) await store.finish(claim, "failed").catch(() => {});
    return failureResult(error, telemetry, state.startedAt);
  }
  // Handed-out calls are answered through the store (settleHandedOutCall); nothing here waits on them.
  inflight.releaseHandedOut();
  inflight.storedAs(store, runId, () => {
    if (engine.inflight.get(state.runId) === inflight) engine.inflight.delete(state.runId);
  });
  return {
    status: "waiting",
    runId,
    reason: end.reason,
    ...(end.reason === "yield" && yieldReason !== undefined
      ? { yieldReason: yieldReason.slice(0, 500) }
      : {}),
    ...(pendingCalls.length
      ? {
          pendingToolCalls: pendingCalls.map(({ callId, toolId, startedAt }) => ({
            callId,
            toolId,
            startedAt,
            ...(queuedIds.has(callId) ? { queued: true as const } : {}),
          })),
        }
      : {}),
    ...(end.output.length ? { output: end.output } : {}),
    telemetry,
  };
}
