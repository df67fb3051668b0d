// The engine state a prepared run uses, and how a run tells the engine's observer what happened.
import type { CodeModeResult, JsonValue, ResolvedCodeModeConfig } from "@codecell/contract";
import type { SandboxPool } from "@codecell/sandbox";
import type { SnapshotStore } from "@codecell/snapshot-store";
import type { CellStore } from "./cell-store.js";
import type { EngineTypecheck } from "./cell-typecheck.js";
import type { InflightCalls } from "./inflight-calls.js";
import type { TracingOptions } from "./tracing.js";
import type { TrajectoryRecorder } from "./trajectory.js";
import type { DebugFields, EngineObserver, EngineStats } from "./types.js";

/** The engine state a prepared run uses: config, counters, store, pool, trajectory and in-flight calls. */
export type EngineShared = {
  readonly config: ResolvedCodeModeConfig;
  readonly stats: EngineStats;
  readonly store: Promise<SnapshotStore>;
  readonly pool: SandboxPool;
  readonly trajectory: TrajectoryRecorder;
  readonly redactInput: (toolId: string, input: JsonValue) => JsonValue;
  readonly debug: ((line: string, fields?: DebugFields) => void) | null;
  readonly inflight: Map<string, InflightCalls>;
  readonly observer: EngineObserver | null;
  readonly tracing: TracingOptions;
  /** The engine's type checker of cells (typecheck "warn" or "strict"); it loads nothing until used. */
  readonly typecheck: EngineTypecheck;
  /** The values cells keep between cells, in `store`. */
  readonly cellStore: CellStore;
  abort(selector: { sessionId: string; runId?: string }): Promise<number>;
  countResult(result: CodeModeResult): void;
};

/** Calls the observer's `hook`, if it has one; an observer that throws never breaks the run. */
export function observe<K extends keyof EngineObserver>(
  engine: EngineShared,
  hook: K,
  event: Parameters<NonNullable<EngineObserver[K]>>[0],
): void {
  const listener = engine.observer?.[hook] as ((event: unknown) => void) | undefined;
  if (listener === undefined) return;
  try {
    listener.call(engine.observer, event);
  } catch {
    // The host's observer failed: observing is advisory, and the run's result must not depend on it.
  }
}
