import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import type { Worker } from "node:worker_threads";
import type { CodeModeDiagnostic, CodeModeLanguage } from "@codecell/contract";

/**
 * node:worker_threads, loaded when the first checker starts, so a host that never type-checks a cell
 * (the default) does not pay for loading it at import.
 */
let workerThreads: typeof import("node:worker_threads") | undefined;

/** A run's declaration text with the key its warm language service is kept under. */
export type GuestDeclarations = { readonly key: string; readonly text: string };

/** Declarations with their key (a hash of the text, so runs with the same guest share one service). */
export function guestDeclarations(text: string): GuestDeclarations {
  return { key: createHash("sha256").update(text).digest("base64url").slice(0, 24), text };
}

export type CellCheckRequest = {
  declarations: GuestDeclarations;
  code: string;
  language: CodeModeLanguage;
};

export type CellCheckResult =
  | {
      status: "checked";
      /** At most `maxDiagnostics`, in the cell's order. */
      diagnostics: CodeModeDiagnostic[];
      /** Every error found, also those past `maxDiagnostics`. */
      total: number;
      durationMs: number;
    }
  /** Not checked because it fails its transpile checks: the sandbox refuses it with its own code. */
  | { status: "skipped"; reason: string; durationMs: number }
  /**
   * The check did not finish (it took longer than `timeoutMs`, the checker stopped or failed, or the
   * compiler could not read the cell): nothing is known of the cell's types. `reason` says which.
   */
  | { status: "unfinished"; reason: string; durationMs: number };

export type CellCheckerOptions = {
  /**
   * How long one check may take, counted from the call (so waiting for the compiler's first load
   * counts too), before it is given up as unfinished. A check that runs over on a ready checker
   * has the checker restarted, and the checks queued behind it are sent to the new one, once, each
   * with a fresh timer (so one slow cell does not fail other runs' checks); a checker still loading the
   * compiler is left to finish loading. Default 15000.
   */
  timeoutMs?: number;
  /** Diagnostics kept per cell. Default 10. */
  maxDiagnostics?: number;
};

type WorkerReply =
  | { id: number; outcome: WorkerOutcome; durationMs: number }
  | { id?: undefined; loaded: true }
  | { id: number; warmed: true }
  | { id: number; error: string };
type WorkerOutcome =
  | { status: "checked"; diagnostics: CodeModeDiagnostic[]; total: number }
  | { status: "skipped" | "unfinished"; reason: string }
  | { status: "missing" };

type Pending = {
  settle(reply: WorkerReply | { id: number; error: string }): void;
  /** A check's: post it again to a new worker (with a timer of its own). Absent once it was resent. */
  resend?: () => void;
};

const WORKER_URL = new URL("./worker/checker-worker.js", import.meta.url);
let workersStarted = 0;

/** How many checker threads this process has started: 0 means the compiler was never loaded. */
export function typecheckWorkersStarted(): number {
  return workersStarted;
}

/**
 * Type-checks cells off the main thread. The worker, and TypeScript in it, start with the first check
 * (or `prepare()`, `warmUp()`);
 * it keeps a warm language service per declaration key (the last few), so a run's later cells, and
 * other runs with the same guest, reuse the parsed declarations. Checks are answered in order.
 */
export class CellChecker {
  readonly #timeoutMs: number;
  readonly #maxDiagnostics: number;
  #worker: Worker | null = null;
  /** True once the current worker answered anything: its compiler is loaded. */
  #ready = false;
  /** The current worker's warm-up, once asked for. */
  #warming: Promise<void> | null = null;
  /** Keys whose declarations the current worker has been sent. */
  #sentKeys = new Set<string>();
  #nextId = 1;
  /**
   * What waits for the current worker, by message id, in the order sent (the worker answers in order).
   * A check can be sent again once, to a new worker, when another request stopped the one it waited on.
   */
  readonly #pending = new Map<number, Pending>();

  constructor(options: CellCheckerOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#maxDiagnostics = options.maxDiagnostics ?? 10;
  }

  /** True once a check started the worker. */
  get started(): boolean {
    return this.#worker !== null;
  }

  async check(request: CellCheckRequest): Promise<CellCheckResult> {
    const startedAt = performance.now();
    const unfinished = (reason: string): CellCheckResult => ({
      status: "unfinished",
      reason,
      durationMs: performance.now() - startedAt,
    });
    const { key, text } = request.declarations;
    let reply = await this.#send(request, this.#sentKeys.has(key) ? undefined : text);
    // The worker keeps a few services; one it dropped is sent again.
    if ("outcome" in reply && reply.outcome.status === "missing") reply = await this.#send(request, text);
    if ("error" in reply) return unfinished(reply.error);
    if (!("outcome" in reply)) return unfinished("the checker answered a check with something else");
    const { outcome } = reply;
    if (outcome.status === "missing") return unfinished("the checker lost the run's declarations");
    if (outcome.status !== "checked") {
      return { status: outcome.status, reason: outcome.reason, durationMs: performance.now() - startedAt };
    }
    return { ...outcome, durationMs: performance.now() - startedAt };
  }

  /**
   * Builds the checker of these declarations now, before their first cell (a run that was just
   * prepared): that cell then costs a warm check. Starts the worker if needed; resolves when done (or
   * when the checker failed: the cell's own check reports that); never rejects and has no timeout.
   */
  async prepare(declarations: GuestDeclarations): Promise<void> {
    if (this.#sentKeys.has(declarations.key)) return;
    const worker = this.#start();
    this.#sentKeys.add(declarations.key);
    await this.#ask(worker, { prepare: true, key: declarations.key, declarations: declarations.text });
  }

  /**
   * Starts the worker now and has it load the compiler and parse the language's library, for a host
   * that knows cells are coming: the first check then costs what a warm one does plus the run's own
   * declarations. Resolves when the worker is ready; never rejects.
   */
  async warmUp(): Promise<void> {
    const worker = this.#start();
    if (this.#warming) return this.#warming;
    this.#warming = this.#ask(worker, { warm: true });
    return this.#warming;
  }

  /** Posts `message` under a new id; resolves when the worker answers it, or when it is gone. */
  #ask(worker: Worker, message: Record<string, unknown>): Promise<void> {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      this.#pending.set(id, {
        settle: () => {
          this.#answered(id);
          resolve();
        },
      });
      worker.ref();
      worker.postMessage({ id, ...message });
    });
  }

  /** `id` needs no answer any more; the worker may let the process exit once nothing waits on it. */
  #answered(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker?.unref();
  }

  /** Stops the worker; a later check starts a new one. */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#reset("the checker was closed");
    await worker?.terminate();
  }

  #send(request: CellCheckRequest, declarations: string | undefined): Promise<WorkerReply> {
    return new Promise((resolve) => {
      const post = (text: string | undefined, resent: boolean) => {
        const worker = this.#start();
        const id = this.#nextId++;
        const { key } = request.declarations;
        if (text !== undefined) this.#sentKeys.add(key);
        const timer = setTimeout(() => {
          this.#pending.delete(id);
          if (this.#worker === worker && !this.#ready) {
            // Still loading the compiler: stopping it would only make the next cell wait for a new load.
            resolve({
              id,
              error: `the checker was still loading the compiler after ${this.#timeoutMs} ms`,
            });
            if (this.#pending.size === 0) worker.unref();
            return;
          }
          // True to what held it: its own check, or checks sent before it that the thread still works on.
          const ahead = [...this.#pending.keys()].some((other) => other < id);
          resolve({
            id,
            error: ahead
              ? `the checker was busy with earlier checks for ${this.#timeoutMs} ms, so this cell's check did not start`
              : `the type check took longer than ${this.#timeoutMs} ms`,
          });
          // A check that runs away holds the thread: a fresh worker serves the checks queued behind it.
          if (this.#worker === worker) {
            this.#restartAfter(worker);
            void worker.terminate();
          }
        }, this.#timeoutMs);
        const settle = (reply: WorkerReply | { id: number; error: string }) => {
          clearTimeout(timer);
          this.#answered(id);
          resolve(reply);
        };
        const resend = () => {
          clearTimeout(timer);
          // The new worker has none of the old one's declarations: the first check of a key brings them.
          post(this.#sentKeys.has(key) ? undefined : request.declarations.text, true);
        };
        this.#pending.set(id, resent ? { settle } : { settle, resend });
        worker.ref();
        worker.postMessage({
          id,
          key,
          ...(text !== undefined ? { declarations: text } : {}),
          code: request.code,
          language: request.language,
          maxDiagnostics: this.#maxDiagnostics,
        });
      };
      post(declarations, false);
    });
  }

  #start(): Worker {
    if (this.#worker) return this.#worker;
    workerThreads ??= createRequire(import.meta.url)(
      "node:worker_threads",
    ) as typeof import("node:worker_threads");
    workersStarted++;
    // A clean execArgv: the worker resolves packages to their built files whatever flags the host runs
    // with (a test runner's source conditions would point it at TypeScript it cannot load).
    const worker = new workerThreads.Worker(WORKER_URL, { execArgv: [] });
    worker.on("message", (reply: WorkerReply) => {
      if (this.#worker === worker) this.#ready = true;
      if (reply.id === undefined) return;
      this.#pending.get(reply.id)?.settle(reply);
    });
    const fail = (why: string) => {
      if (this.#worker !== worker) return;
      // The request it was working on (the oldest) gets the failure; those queued behind it go to a new
      // worker, so one cell that brings the checker down does not fail other runs' checks.
      const [oldest] = this.#pending;
      if (oldest) {
        this.#pending.delete(oldest[0]);
        oldest[1].settle({ id: oldest[0], error: why });
      }
      this.#restartAfter(worker, why);
    };
    worker.on("error", (error) => fail(`the checker failed: ${String(error)}`));
    worker.on("exit", (code) => fail(`the checker stopped (exit code ${code})`));
    worker.unref();
    this.#worker = worker;
    return worker;
  }

  /** Forgets the current worker; what waited on it is answered `why`. */
  #reset(why: string): void {
    const pending = this.#forgetWorker();
    for (const [id, entry] of pending) entry.settle({ id, error: why });
  }

  /**
   * Forgets `worker`, which stopped (or was stopped) under one request, and sends the checks queued
   * behind it to a new worker, each with a fresh timer; a check already sent again, and a warm-up or
   * prepare, is answered `why` instead (a prepare's declarations come with the next check).
   */
  #restartAfter(worker: Worker, why = "the checker was restarted"): void {
    if (this.#worker !== worker) return;
    const pending = this.#forgetWorker();
    for (const [id, entry] of pending) {
      if (entry.resend) entry.resend();
      else entry.settle({ id, error: why });
    }
  }

  #forgetWorker(): [number, Pending][] {
    this.#worker = null;
    this.#ready = false;
    this.#warming = null;
    this.#sentKeys = new Set();
    const pending = [...this.#pending];
    this.#pending.clear();
    return pending;
  }
}
