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
  /**
   * Whose check it is (a principal). Checks wait in one queue per owner and the checker takes them
   * round robin between owners, so one owner's checks never hold another's behind them. Default "".
   */
  owner?: string;
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
   * compiler could not read the cell): nothing is known of the cell's types. `reason` says which, in
   * words; `cause` says which for a host that words its own advice (see `UnfinishedCause`).
   */
  | { status: "unfinished"; reason: string; cause: UnfinishedCause; durationMs: number };

/**
 * Why a check did not finish: `"budget"`, the cell kept the loaded compiler busy past `budgetMs` (the
 * same cell again will run over again); `"loading"`, the compiler was still loading after `timeoutMs`
 * (the same cell again may find it ready); `"failed"`, the checker stopped, failed or was closed.
 */
export type UnfinishedCause = "budget" | "loading" | "failed";

export type CellCheckerOptions = {
  /**
   * How long a check whose turn came may wait for the compiler to load (a new thread, or one restarted
   * after a runaway check), before it is given up as unfinished. The thread is left to finish loading,
   * so the next cell finds it ready. Default 15000.
   */
  timeoutMs?: number;
  /**
   * How long one check may keep the loaded compiler busy. A check over it is ended as unfinished ("the
   * type check took longer than N ms"), and the thread is replaced so the checks queued behind it go
   * on. At most `timeoutMs`; default `timeoutMs`.
   */
  budgetMs?: number;
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
type Reply = WorkerReply | { error: string; cause?: UnfinishedCause };

/** One message for the thread, waiting for its turn in its owner's queue. */
type Job = {
  owner: string;
  /** The message without its id; a check's declarations are added when it is sent (see `send`). */
  message: Record<string, unknown>;
  /** A check's declarations, sent with it when the thread does not have them yet. */
  declarations?: GuestDeclarations;
  /** Whether the budget applies: checks and prepares, not the host's own warm-up. */
  budgeted: boolean;
  /** Answers the job's caller, once (later calls do nothing). */
  answer(reply: Reply): void;
  /** Its place in the fair order (see `#enqueue`), then the order of arrival. */
  tag?: number;
  seq?: number;
};

/** An owner's jobs not sent yet, and the tag of its last job (sent or not). */
type OwnerQueue = { jobs: Job[]; lastTag: number };

/** The job the thread is working on: its slot is free only when the thread answers or is replaced. */
type InFlight = { id: number; job: Job; worker: Worker; timer: NodeJS.Timeout | undefined };

const WORKER_URL = new URL("./worker/checker-worker.js", import.meta.url);
let workersStarted = 0;

/** How many checker threads this process has started: 0 means the compiler was never loaded. */
export function typecheckWorkersStarted(): number {
  return workersStarted;
}

/**
 * Type-checks cells off the main thread. The worker, and TypeScript in it, start with the first check
 * (or `prepare()`, `warmUp()`); it keeps a warm language service per declaration key (the last few), so
 * a run's later cells, and other runs with the same guest, reuse the parsed declarations.
 *
 * The thread works on one check at a time. Checks wait in a queue per owner and are taken round robin
 * between owners, and each may keep the compiler busy for `budgetMs` at most: so a cell that makes the
 * compiler explode costs its owner, and holds another owner's check for one budget at most.
 */
export class CellChecker {
  readonly #timeoutMs: number;
  readonly #budgetMs: number;
  readonly #maxDiagnostics: number;
  #worker: Worker | null = null;
  /** True once the current worker answered anything: its compiler is loaded. */
  #ready = false;
  /** The current worker's warm-up, once asked for. */
  #warming: Promise<void> | null = null;
  /** Keys whose declarations the current worker has been sent. */
  #sentKeys = new Set<string>();
  #nextId = 1;
  /** Jobs not sent yet, per owner, with each owner's last tag. */
  readonly #queues = new Map<string, OwnerQueue>();
  /** The tag of the job sent last: owners that come (back) start from it, not from zero. */
  #virtualTime = 0;
  #seq = 0;
  #inFlight: InFlight | null = null;

  constructor(options: CellCheckerOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#budgetMs = Math.min(options.budgetMs ?? this.#timeoutMs, this.#timeoutMs);
    this.#maxDiagnostics = options.maxDiagnostics ?? 10;
  }

  /** True once a check started the worker. */
  get started(): boolean {
    return this.#worker !== null;
  }

  /** Checks not yet started, of every owner (the one the thread works on not included). */
  get queued(): number {
    let count = 0;
    for (const queue of this.#queues.values()) count += queue.jobs.length;
    return count;
  }

  async check(request: CellCheckRequest): Promise<CellCheckResult> {
    const startedAt = performance.now();
    const unfinished = (reason: string, cause: UnfinishedCause = "failed"): CellCheckResult => ({
      status: "unfinished",
      reason,
      cause,
      durationMs: performance.now() - startedAt,
    });
    let reply = await this.#checkOnce(request, false);
    // The worker keeps a few services; one it dropped is sent again.
    if ("outcome" in reply && reply.outcome.status === "missing")
      reply = await this.#checkOnce(request, true);
    if ("error" in reply) return unfinished(reply.error, "cause" in reply ? reply.cause : undefined);
    if (!("outcome" in reply)) return unfinished("the checker answered a check with something else");
    const { outcome } = reply;
    if (outcome.status === "missing") return unfinished("the checker lost the run's declarations");
    if (outcome.status === "unfinished") return unfinished(outcome.reason);
    if (outcome.status === "skipped") {
      return { status: "skipped", reason: outcome.reason, durationMs: performance.now() - startedAt };
    }
    if (outcome.status !== "checked") return unfinished("the checker answered a check with something else");
    return { ...outcome, durationMs: performance.now() - startedAt };
  }

  /**
   * Builds the checker of these declarations now, before their first cell (a run that was just
   * prepared): that cell then costs a warm check. Starts the worker if needed; resolves when done (or
   * when the checker failed or ran over its budget: the cell's own check reports that); never rejects.
   */
  async prepare(declarations: GuestDeclarations, owner = ""): Promise<void> {
    if (this.#sentKeys.has(declarations.key)) return;
    await new Promise<Reply>((resolve) =>
      this.#enqueue({
        owner,
        message: { prepare: true, key: declarations.key },
        declarations,
        budgeted: true,
        answer: resolve,
      }),
    );
  }

  /**
   * Starts the worker now and has it load the compiler and parse the language's library, for a host
   * that knows cells are coming: the first check then costs what a warm one does plus the run's own
   * declarations. Resolves when the worker is ready; never rejects.
   */
  async warmUp(): Promise<void> {
    if (this.#warming) return this.#warming;
    const warming = new Promise<void>((resolve) =>
      this.#enqueue({ owner: "", message: { warm: true }, budgeted: false, answer: () => resolve() }),
    );
    this.#warming = warming;
    return warming;
  }

  /** Stops the worker; a later check starts a new one. Every check not answered yet is answered unfinished. */
  async close(): Promise<void> {
    const worker = this.#worker;
    const waiting = [...this.#queues.values()].flatMap((queue) => queue.jobs);
    this.#queues.clear();
    const current = this.#forgetWorker();
    for (const job of [...(current ? [current.job] : []), ...waiting]) {
      job.answer({ error: "the checker was closed" });
    }
    await worker?.terminate();
  }

  #checkOnce(request: CellCheckRequest, resendDeclarations: boolean): Promise<Reply> {
    const { key } = request.declarations;
    if (resendDeclarations) this.#sentKeys.delete(key);
    return new Promise((resolve) =>
      this.#enqueue({
        owner: request.owner ?? "",
        message: {
          key,
          code: request.code,
          language: request.language,
          maxDiagnostics: this.#maxDiagnostics,
        },
        declarations: request.declarations,
        budgeted: true,
        answer: resolve,
      }),
    );
  }

  /**
   * Queues a job under its owner. Fair order (start-time fair queuing, every check counted as one):
   * an owner's jobs get tags one apart, starting from the later of its last tag and the tag of the job
   * sent last, and the lowest tag goes next. So owners are taken round robin, an owner that comes back
   * after a pause gets no credit for it, and one owner's hundred checks wait behind each other only.
   */
  #enqueue(job: Job): void {
    let answered = false;
    const answer = job.answer;
    const queue = this.#queues.get(job.owner) ?? { jobs: [], lastTag: 0 };
    queue.lastTag = Math.max(queue.lastTag, this.#virtualTime) + 1;
    queue.jobs.push({
      ...job,
      tag: queue.lastTag,
      seq: this.#seq++,
      answer: (reply) => {
        if (answered) return;
        answered = true;
        answer(reply);
      },
    });
    this.#queues.set(job.owner, queue);
    this.#next();
  }

  /** Sends the job with the lowest tag (the earliest among equal ones) when the thread is free. */
  #next(): void {
    if (this.#inFlight !== null) return;
    let chosen: OwnerQueue | undefined;
    for (const [owner, queue] of this.#queues) {
      const head = queue.jobs[0];
      if (head === undefined) {
        // Idle and not ahead of the fair order: it would start from the virtual time anyway.
        if (queue.lastTag <= this.#virtualTime) this.#queues.delete(owner);
        continue;
      }
      const best = chosen?.jobs[0];
      if (best === undefined || head.tag! < best.tag! || (head.tag === best.tag && head.seq! < best.seq!)) {
        chosen = queue;
      }
    }
    const job = chosen?.jobs.shift();
    if (job === undefined) {
      this.#worker?.unref();
      return;
    }
    this.#virtualTime = job.tag! - 1;
    this.#send(job);
  }

  #send(job: Job): void {
    const worker = this.#start();
    const id = this.#nextId++;
    const message: Record<string, unknown> = { id, ...job.message };
    const declarations = job.declarations;
    if (declarations !== undefined && !this.#sentKeys.has(declarations.key)) {
      // A prepare always carries them; a check only when this thread has not got them yet.
      message.declarations = declarations.text;
      this.#sentKeys.add(declarations.key);
    } else if (job.message.prepare) {
      // Already sent by a check queued before it: nothing to build.
      job.answer({ id, warmed: true });
      this.#next();
      return;
    }
    const inFlight: InFlight = { id, job, worker, timer: undefined };
    this.#inFlight = inFlight;
    if (this.#ready) this.#startBudget(inFlight);
    else if (job.budgeted) {
      inFlight.timer = setTimeout(() => {
        // Still loading the compiler: stopping it would only make the next cell wait for a new load. The
        // job stays in the slot until the thread answers it.
        job.answer({
          error: `the checker was still loading the compiler after ${this.#timeoutMs} ms`,
          cause: "loading",
        });
      }, this.#timeoutMs);
    }
    worker.ref();
    worker.postMessage(message);
  }

  /** From now on the job keeps a loaded compiler busy: over budget, it ends and the thread is replaced. */
  #startBudget(inFlight: InFlight): void {
    if (!inFlight.job.budgeted) return;
    clearTimeout(inFlight.timer);
    inFlight.timer = setTimeout(() => {
      if (this.#inFlight !== inFlight) return;
      inFlight.job.answer({ error: `the type check took longer than ${this.#budgetMs} ms`, cause: "budget" });
      this.#replace(inFlight.worker);
    }, this.#budgetMs);
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
      if (this.#worker !== worker) return;
      const inFlight = this.#inFlight;
      if (!this.#ready) {
        // The compiler is loaded: the job waiting on the load starts its budget now.
        this.#ready = true;
        if (inFlight && inFlight.worker === worker && reply.id !== inFlight.id) this.#startBudget(inFlight);
      }
      if (reply.id === undefined || inFlight?.id !== reply.id) return;
      clearTimeout(inFlight.timer);
      this.#inFlight = null;
      inFlight.job.answer(reply);
      this.#next();
    });
    const fail = (why: string) => {
      if (this.#worker !== worker) return;
      // The job it was working on gets the failure; those queued go to a new worker.
      this.#inFlight?.job.answer({ error: why });
      this.#replace(worker);
    };
    worker.on("error", (error) => fail(`the checker failed: ${String(error)}`));
    worker.on("exit", (code) => fail(`the checker stopped (exit code ${code})`));
    worker.unref();
    this.#worker = worker;
    return worker;
  }

  /** Stops `worker` (a runaway check, or it failed); the queued jobs go on with a new one. */
  #replace(worker: Worker): void {
    if (this.#worker !== worker) return;
    this.#forgetWorker();
    void worker.terminate();
    this.#next();
  }

  /** Forgets the current worker and its state; answers the caller with the job it was working on. */
  #forgetWorker(): InFlight | null {
    const inFlight = this.#inFlight;
    if (inFlight) clearTimeout(inFlight.timer);
    this.#inFlight = null;
    this.#worker = null;
    this.#ready = false;
    this.#warming = null;
    this.#sentKeys = new Set();
    return inFlight;
  }
}
