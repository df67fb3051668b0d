import type { GuestSurface, HostRequest, SandboxLimits } from "@codecell/bridge";
import type {
  CodeModeErrorCode,
  CodeModeErrorData,
  CodeModeLanguage,
  CodeModeOutput,
  JsonValue,
} from "@codecell/contract";

export type { GuestSurface, HostRequest, SandboxLimits };

export type SandboxPoolOptions = {
  /**
   * Warm workers under concurrent runs. The pool starts one worker and adds one (up to `size`) when a
   * run would have to wait for a busy worker; workers up to `size` stay once started. Cells run one at
   * a time keep a single worker. Default: `os.availableParallelism()`.
   */
  size?: number;
  /**
   * The most workers the pool grows to while every worker is held by a cell that keeps running (a
   * spinning or long cell blocks its whole thread until its deadline). Extra workers retire after a
   * while without runs. Default: `size + 2`.
   */
  maxWorkers?: number;
  /** Path or file URL of `quickjs.wasm`. Default: the one in the `quickjs-wasi` dependency. */
  wasm?: URL | string;
  /**
   * Signs snapshots with HMAC-SHA-256 so only holders of the secret can produce restorable bytes. All
   * processes that restore each other's snapshots need the same secret. Default: SHA-256 only (detects
   * corruption; snapshots must then be kept where guests and users cannot write them).
   */
  snapshotSecret?: string;
  /** Largest JSON of one host result delivered into the guest. Default 8 MiB. */
  maxBridgeValueBytes?: number;
  /** Extra time after the deadline (or an abort) before a silent worker is terminated. Default 100 ms. */
  watchdogGraceMs?: number;
  /**
   * How long a run may wait for a worker to take it (cold start, a busy machine) before it fails
   * `runtime_unavailable`. Kept apart from the cell's own timeout, and generous. Default 30,000 ms.
   */
  startupTimeoutMs?: number;
};

/** How a host request ended: a JSON value, or an error delivered to the guest as plain data. */
export type SettleOutcome = { ok: true; value: unknown } | { ok: false; error: CodeModeErrorData };

type RunCommon = {
  /**
   * Who the run belongs to (a session id). Runs of one owner never block more than half of
   * `maxWorkers` at once: further cells of that owner wait behind its own, not in front of others'.
   */
  owner?: string;
  /** The JSON surface the prelude installs (ALL_TOOLS, tools, MCP, API, namespaces). */
  surface: GuestSurface;
  limits: SandboxLimits;
  /**
   * Epoch ms. Guest code that runs past it is interrupted (`timeout`); an idle run is not affected.
   * Give this or `timeoutMs`.
   */
  deadlineAt?: number;
  /**
   * The cell's own wall-clock budget in ms: the deadline is set when a ready worker takes the run, so a
   * worker's cold start (spawning, instantiating WASM, waiting for a free worker) does not count.
   */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called once per guest host call, right away, with its id. Settle it with `run.settle`. */
  onRequest(request: HostRequest): void;
};

export type RunOptions = RunCommon & { code: string; language: CodeModeLanguage };

/** The surface is already inside the snapshot, so a restore does not take one. */
export type RestoreOptions = Omit<RunCommon, "surface"> & { snapshot: Uint8Array };

export type SandboxEvent =
  /** The job queue is empty and host calls are in flight: settle them, or suspend. */
  | { type: "idle"; pending: HostRequest[]; output: CodeModeOutput[] }
  | { type: "completed"; value: JsonValue; output: CodeModeOutput[] }
  /**
   * `code` is absent when the guest itself failed (an uncaught exception, a promise nothing can
   * settle); `error` then carries the guest error's name and message (and code, for bridge errors).
   */
  | {
      type: "failed";
      code?: CodeModeErrorCode;
      message: string;
      error?: CodeModeErrorData;
      output: CodeModeOutput[];
    };

export type SuspendedRun = { snapshot: Uint8Array; bytes: number; pending: HostRequest[] };

export interface SandboxRun {
  readonly runId: string;
  /** Epoch ms the guest must be done by; Infinity until a worker takes a run given `timeoutMs`. */
  readonly deadline: number;
  /** The next state change. After a terminal event it keeps returning that event. */
  next(): Promise<SandboxEvent>;
  /**
   * Deliver one result, in any order. Throws `invalid_input` for ids never issued or already settled,
   * and for a suspended run (results go to the restored one); ignored once the run has ended otherwise.
   */
  settle(requestId: string, outcome: SettleOutcome): void;
  /**
   * Only when idle (the last event was `idle` and nothing was settled since). Frees the VM. Rejects
   * with the run's own failure (code and message) when it failed meanwhile.
   */
  suspend(): Promise<SuspendedRun>;
  /** Move the guest's deadline (a `wait` gives the run a fresh one). */
  setDeadline(deadlineAt: number): void;
  /** Free the VM. Pending `next()` calls get a failed `aborted` event. */
  dispose(): void;
}

export interface SandboxPool {
  /** A fresh VM per run, never shared (a new one, or a finished run's VM reset to a fresh VM's image). */
  run(options: RunOptions): SandboxRun;
  /** Continue a suspended run on any worker of any process. */
  restore(options: RestoreOptions): SandboxRun;
  /**
   * Counters for health checks, tests and benches. `answersCaught` / `spinsEmpty`: the host's spins for
   * a worker's answer (see the README's "shared channel") that caught it, and that ended without it.
   */
  stats(): {
    workers: number;
    /** Workers with at least one cell on them. */
    busyWorkers: number;
    liveRuns: number;
    workersReplaced: number;
    answersCaught: number;
    spinsEmpty: number;
  };
  close(): Promise<void>;
}
