// @ts-check
// One file past ~600 lines: GuestRun is one run's state machine (start or restore, the queue of
// operations, host-call delivery, the deadline, the report and the release of its VM). Every method reads
// and writes the same few fields (the VM, its control handle, the outcome, the held strings), so a split
// would pass that state between files without making any part readable alone. What is not the run's
// state already lives beside it: the VM pool (vm-pool.js), host calls (host-calls.js), output
// (outbox.js), snapshots (run-snapshot.js) and the cell's text (cell-text.js).
import { DOUBLE_ZERO, emptyReferenceArray } from "@codecell/bridge/v8-shapes";
import { isCodeModeErrorCode } from "@codecell/contract/errors";
// The plain-cell test only: the parser (acorn) is loaded on the first cell that needs it.
import { isPlainJavaScriptCell } from "@codecell/transpile/plain-cell";
import { JSException } from "quickjs-wasi";
import { CELL_PREFIX, cellFilename, describeGuestError } from "./cell-text.js";
import { forgetPending, HOST_FUNCTION_NAME, hostCallback, newRequestId, tooDeep } from "./host-calls.js";
import { flushOutbox, NOTHING, post, takeOutput } from "./outbox.js";
import { loadSnapshotCodec } from "./run-snapshot.js";
import { runVmOptions } from "./vm-image.js";
import {
  buildWantedSpares,
  dropVm,
  recycleVm,
  sparesWanted,
  startTakingImages,
  takeFreshVm,
  trimRecycledVms,
  wantSpare,
} from "./vm-pool.js";
import { VmStrings } from "./vm-strings.js";
import { silentWasi } from "./wasi-entropy.js";
import { compilePreludeAside } from "./worker-init.js";
import { state } from "./worker-state.js";

/**
 * One run of a cell in this worker, from its start (or restore) to its end: its operations in order,
 * its limits and deadline, its VM, what the guest has asked of the host and what it reports.
 * @typedef {import("quickjs-wasi").QuickJS} QuickJS
 * @typedef {import("./vm-pool.js").OwnedVm} OwnedVm
 */

/**
 * Codes the prelude raises on its own (a bad `API.read` path). Every other code a guest error may carry
 * must first have been handed to this run by the worker or the host (see GuestRun.issuedCodes).
 */
const PRELUDE_CODES = ["invalid_input"];
/** A run idle this long is waiting on slow host work: time to do the worker's own chores. */
const IDLE_WORK_AFTER_MS = 2;

/**
 * The cell checker and TypeScript stripper (acorn, and sucrase on the first TypeScript cell), run here,
 * off the host's event loop. Loaded on the first cell that is not plain (see GuestRun.start): most
 * cells never need it, and a worker that loads it costs its start-up CPU and memory.
 * @type {Promise<typeof import("@codecell/transpile")> | null}
 */
let transpile = null;
function loadTranspile() {
  transpile ??= import("@codecell/transpile");
  return transpile;
}

export class GuestRun {
  /**
   * @param {string} runId
   * @param {import("@codecell/bridge").SandboxLimits} limits
   * @param {number} deadlineAt
   * @param {Int32Array} signal
   */
  constructor(runId, limits, deadlineAt, signal) {
    this.runId = runId;
    this.limits = limits;
    this.deadlineAt = deadlineAt;
    /** The cell's own budget when its clock starts in this worker (start with timeoutMs). */
    /** @type {number | null} */
    this.timeoutMs = null;
    this.signal = signal;
    /** @type {QuickJS | null} */
    this.vm = null;
    /** @type {import("quickjs-wasi").JSValueHandle | null} */
    this.control = null;
    /** The VM as takeFreshVm handed it over, for recycleVm when the run ends (null after a restore). */
    /** @type {OwnedVm | null} */
    this.owned = null;
    /**
     * Strings this run passes into the VM again and again, made on first use: the fixed arguments of
     * every settle call into the prelude (see deliver) and the empty reply of the host function.
     * @type {{ op: import("quickjs-wasi").JSValueHandle, ok: import("quickjs-wasi").JSValueHandle, failed: import("quickjs-wasi").JSValueHandle, empty: import("quickjs-wasi").JSValueHandle } | null}
     */
    this.fixedStrings = null;
    /** The short way for a call's strings into and out of this run's VM (see vmStrings). */
    /** @type {VmStrings | null} */
    this.strings = null;
    /**
     * quickjs-wasi takes its own reference to whatever a host callback returns and leaves the returned
     * handle to the callback: a reply never freed here would stay in the VM's heap for the rest of the
     * run (a long loop of calls ran a small VM out of memory). The last one-off reply (a refusal) is
     * freed at the next host call; a request's id is kept until its result is delivered, which passes
     * the same string back into the VM instead of making it again.
     * @type {import("quickjs-wasi").JSValueHandle | null}
     */
    this.lastReply = null;
    /** @type {Map<string, import("quickjs-wasi").JSValueHandle>} */
    this.requestIdHandles = new Map();
    this.controlToken = 0;
    /** @type {Map<string, import("@codecell/bridge").HostRequest>} */
    this.pending = new Map();
    /** A restored run's first idle lists its pending requests: the host has no request messages of them. */
    this.announcePending = false;
    /** How many pending requests are tool calls (they count toward maxPendingToolCalls). */
    this.pendingToolCalls = 0;
    this.nextRequestNumber = 0;
    this.outputBytes = 0;
    /**
     * The codes this run's guest has been handed inside errors (refusals, failed host results). An
     * uncaught guest error fails the run with its code only when the code is in this set: a guest can
     * pass on a code it was given, never invent one (a forged `timeout` or `memory_limit_exceeded`).
     * @type {Set<string>}
     */
    this.issuedCodes = new Set(PRELUDE_CODES);
    /** @type {import("@codecell/contract").CodeModeOutput[]} */
    this.output = [];
    /** @type {{ type: "completed", value: unknown } | { type: "failed", code: string | null, message: string, error: unknown } | null} */
    this.outcome = null;
    /** A failure decided by the host side (limits, deadline, abort): the interrupt handler enforces it. */
    /** @type {{ code: import("@codecell/contract").CodeModeErrorCode, message: string } | null} */
    this.forced = null;
    this.finished = false;
    /**
     * Requests issued during a short drain wait here and leave with the state message that ends the
     * drain: one message per round trip instead of two (an idle carries them itself). A drain that runs
     * long sends them at once so the host can start work in parallel.
     * One array for the run (flushOutbox empties it), holding references from the start.
     * @type {import("@codecell/bridge").HostRequest[]}
     */
    this.outbox = emptyReferenceArray();
    /**
     * About how much text the outbox's requests, and the output and returned value not yet reported,
     * carry (UTF-16 units): a message that cannot fit the shared channel's slot is not encoded for it.
     */
    this.outboxChars = 0;
    this.unreportedChars = 0;
    this.reportChars = 0;
    // Times (performance.now()): doubles from the start (see DOUBLE_ZERO of @codecell/bridge).
    this.commandStartedAt = DOUBLE_ZERO;
    /** The idle-work timer (scheduleIdleWork) and the idle period it watches. */
    /** @type {NodeJS.Timeout | null} */
    this.idleTimer = null;
    this.idleSince = DOUBLE_ZERO;
    /** The commandStartedAt of the last idle report (NaN before the first: equal to none). */
    this.idleSinceCommand = Number.NaN;
    /** Serializes this run's operations: a start awaits VM creation while other messages arrive. */
    /** @type {Promise<void>} */
    this.queue = Promise.resolve();
    /** Operations of this run running or waiting in `queue`. */
    this.operationsQueued = 0;
    /**
     * The key its snapshots are sealed and checked with: its pool's, as the worker had it when the run
     * began (the worker started early gets its pool's key with the pool's own init).
     */
    this.snapshotSecret = state.snapshotSecret;
  }

  /** @param {() => Promise<void> | void} operation */
  enqueue(operation) {
    state.operationsInFlight += 1;
    this.operationsQueued += 1;
    if (this.operationsQueued === 1) {
      // Nothing of this run is running or waiting (the usual settle of a loop of host calls): run it
      // now, rather than three promise turns later.
      let result;
      try {
        result = this.runOperation(operation);
      } catch (error) {
        this.crash(error);
      }
      if (result instanceof Promise) {
        this.queue = result.catch((error) => this.crash(error)).finally(() => this.operationDone());
      } else {
        this.operationDone();
      }
      return;
    }
    this.queue = this.queue
      .then(() => this.runOperation(operation))
      .catch((error) => this.crash(error))
      .finally(() => this.operationDone());
  }

  /** @param {() => Promise<void> | void} operation */
  runOperation(operation) {
    if (this.finished) return undefined;
    this.commandStartedAt = performance.now();
    return operation();
  }

  operationDone() {
    this.operationsQueued -= 1;
    state.operationsInFlight -= 1;
    if (state.operationsInFlight === 0 && sparesWanted.size > 0) setImmediate(buildWantedSpares);
  }

  /** @param {import("@codecell/contract").CodeModeErrorCode} code @param {string} message */
  force(code, message) {
    if (this.forced === null) this.forced = { code, message };
  }

  shouldInterrupt() {
    if (this.forced !== null) return true;
    if (Atomics.load(this.signal, 0) !== 0) {
      this.force("aborted", "The run was aborted by its caller.");
      return true;
    }
    if (Date.now() >= this.deadlineAt) {
      const budget = this.timeoutMs === null ? "its deadline" : `its ${this.timeoutMs} ms deadline`;
      this.force(
        "timeout",
        `The cell ran past ${budget} (timeoutMs) and was stopped. Do less in one exec (split the work over several cells, or page and filter it); a loop that never ends is stopped the same way.`,
      );
      return true;
    }
    return false;
  }

  vmOptions() {
    return runVmOptions(
      /** @type {import("quickjs-wasi").QuickJSOptions["wasm"]} */ (state.wasmModule),
      this.limits.memoryLimitBytes,
      () => this.shouldInterrupt(),
      silentWasi,
    );
  }

  /**
   * Check the cell (module access, syntax) and strip TypeScript types. A refusal becomes the run's
   * outcome with the transpiler's code (module_access_denied, invalid_input, typescript_transform_failed).
   * @param {string} source @param {import("@codecell/contract").CodeModeLanguage} language
   * @returns {Promise<import("@codecell/transpile").PreparedCell | null>}
   */
  async prepare(source, language) {
    try {
      const { prepareCell } = await loadTranspile();
      return await prepareCell(source, language);
    } catch (error) {
      const failure = /** @type {{ code?: unknown, message?: unknown }} */ (error ?? {});
      const code = isCodeModeErrorCode(failure.code) ? failure.code : "internal_error";
      const message =
        code === "internal_error"
          ? `The cell could not be prepared: ${String(failure.message ?? error)}`
          : String(failure.message);
      this.outcome = { type: "failed", code, message, error: null };
      return null;
    }
  }

  /** @param {string} surface @param {string} source @param {import("@codecell/contract").CodeModeLanguage} language */
  async start(surface, source, language) {
    // A plain cell (no module word, nothing that could close the function it is the body of) skips
    // the parser: compiling it below is its syntax check, and the parser words the error if that fails.
    const plain = language === "javascript" && isPlainJavaScriptCell(source);
    const prepared = plain ? { code: source, inserted: null } : await this.prepare(source, language);
    if (prepared === null) return this.report();
    // Compiled at init; compiled aside here only if that failed (this throws what went wrong).
    const bytecode = state.preludeBytecode ?? (await compilePreludeAside());
    const owned = await takeFreshVm(this, surface);
    const vm = owned.vm;
    this.vm = vm;
    this.owned = owned;
    if (this.finished) return this.release();
    if (owned.control !== null) {
      // The spare ran the prelude with this very surface: point its host function at this run.
      vm.registerHostCallback(HOST_FUNCTION_NAME, hostCallback(this));
      this.control = owned.control;
    } else {
      const host = vm.newFunction(HOST_FUNCTION_NAME, hostCallback(this));
      const prelude = owned.prelude ?? vm.evalBytecode(bytecode);
      const surfaceHandle = this.vmStrings().newString(surface);
      this.control = vm.callFunction(prelude, vm.undefined, host, surfaceHandle);
      surfaceHandle.dispose();
      prelude.dispose();
      host.dispose();
    }
    this.controlToken = vm.exportHandle(this.control);

    if (this.timeoutMs !== null) {
      this.deadlineAt = Date.now() + this.timeoutMs;
      post({ type: "started", runId: this.runId, deadlineAt: this.deadlineAt });
    }
    let cell;
    try {
      cell = vm.evalCode(`${CELL_PREFIX}${prepared.code}\n})`, cellFilename(prepared.inserted));
    } catch (error) {
      // A plain cell that does not compile gets the parser's verdict, as every cell did before it ran:
      // the same `invalid_input` message, line and column a checked cell gets.
      if (plain && error instanceof JSException && this.forced === null) {
        if ((await this.prepare(source, language)) === null) {
          error.dispose();
          return this.report();
        }
      }
      if (error instanceof JSException && error.name === "SyntaxError" && this.forced === null) {
        const data = { name: error.name, message: error.message, stack: error.stack ?? "" };
        this.outcome = {
          type: "failed",
          code: "invalid_input",
          message: `The cell does not parse: ${describeGuestError(data)}`,
          error: { name: "SyntaxError", message: error.message, code: "invalid_input" },
        };
        error.dispose();
        return this.report();
      }
      throw error;
    }
    this.call("start", cell);
    cell.dispose();
    this.drain();
    this.report();
  }

  /** @param {string} op @param {...(import("quickjs-wasi").JSValueHandle | string)} args */
  call(op, ...args) {
    const vm = /** @type {QuickJS} */ (this.vm);
    const strings = this.vmStrings();
    const handles = [
      strings.newString(op),
      ...args.map((arg) => (typeof arg === "string" ? strings.newString(arg) : arg)),
    ];
    const result = vm.callFunction(
      /** @type {import("quickjs-wasi").JSValueHandle} */ (this.control),
      vm.undefined,
      ...handles,
    );
    const reply = strings.read(result);
    result.dispose();
    for (let index = 0; index < handles.length; index++) {
      const handle = /** @type {import("quickjs-wasi").JSValueHandle} */ (handles[index]);
      if (index === 0 || typeof args[index - 1] === "string") handle.dispose();
    }
    return reply;
  }

  vmStrings() {
    this.strings ??= new VmStrings(/** @type {QuickJS} */ (this.vm));
    return this.strings;
  }

  heldStrings() {
    if (this.fixedStrings === null) {
      const strings = this.vmStrings();
      this.fixedStrings = {
        op: strings.newString("settle"),
        ok: strings.newString("1"),
        failed: strings.newString("0"),
        empty: strings.newString(""),
      };
    }
    return this.fixedStrings;
  }

  /**
   * Hand one result to the prelude: control("settle", id, "1" | "0", json). The fixed arguments are made
   * once per VM, the id is the value the request returned to the guest (made again only for a restored
   * run's requests), and the prelude's reply is not read: a result costs one string into the VM.
   * @param {string} requestId @param {boolean} ok @param {string} json
   */
  deliver(requestId, ok, json) {
    const vm = /** @type {QuickJS} */ (this.vm);
    const args = this.heldStrings();
    const kept = this.requestIdHandles.get(requestId);
    if (kept !== undefined) this.requestIdHandles.delete(requestId);
    const id = kept ?? newRequestId(this, requestId);
    /** @type {import("quickjs-wasi").JSValueHandle | null} */
    let text = null;
    try {
      text = this.vmStrings().newString(json);
      vm.callFunction(
        /** @type {import("quickjs-wasi").JSValueHandle} */ (this.control),
        vm.undefined,
        args.op,
        id,
        ok ? args.ok : args.failed,
        text,
      ).dispose();
    } finally {
      id.dispose();
      text?.dispose();
    }
  }

  /**
   * Free every string this run holds in the VM (before a snapshot, so the image carries none of them;
   * a run that stays live makes them again as needed).
   */
  dropHeldStrings() {
    const held = this.fixedStrings;
    const lastReply = this.lastReply;
    const ids = [...this.requestIdHandles.values()];
    this.fixedStrings = null;
    this.lastReply = null;
    this.requestIdHandles.clear();
    if (held !== null) {
      held.op.dispose();
      held.ok.dispose();
      held.failed.dispose();
      held.empty.dispose();
    }
    lastReply?.dispose();
    for (const id of ids) id.dispose();
    this.strings?.release();
  }

  /**
   * Run the guest's promise jobs until none is left (executePendingJobs loops until the queue is empty,
   * jobs queued by jobs included). A cell that keeps queueing jobs without end is stopped by the
   * interrupt handler at its deadline, like any other endless loop.
   */
  drain() {
    /** @type {QuickJS} */ (this.vm).executePendingJobs();
  }

  /** @param {import("@codecell/bridge").SettleItem[]} items @param {number} deadlineAt */
  settle(items, deadlineAt) {
    this.deadlineAt = deadlineAt;
    for (const item of items) {
      if (!forgetPending(this, item.requestId)) continue;
      let ok = item.ok;
      let json = item.json;
      // The host marks a result it knows nests far less than the bridge limit (see SettleItem).
      if (ok && item.shallow !== true) {
        const deep = tooDeep(json, "The tool result");
        if (deep !== null) {
          ok = false;
          json = JSON.stringify({ name: "CodeModeError", message: deep, code: "nested_tool_failed" });
        }
      }
      if (!ok) this.noteIssuedCode(json);
      this.deliver(item.requestId, ok, json);
    }
    this.drain();
    this.report();
  }

  /** @param {string} errorJson a failed host result as the guest will see it */
  noteIssuedCode(errorJson) {
    try {
      const code = JSON.parse(errorJson)?.code;
      if (isCodeModeErrorCode(code)) this.issuedCodes.add(code);
    } catch {
      // Not JSON: the prelude fails the settle the same way, and no code is issued.
    }
  }

  /**
   * If the host leaves this run idle for a while, prepare for a suspend and for the next run. One timer
   * per run at a time, not one per idle report: a loop of quick host calls goes idle every few tens of
   * microseconds, and a timer for each of them cost more than the calls themselves.
   */
  scheduleIdleWork() {
    const idleFor = this.commandStartedAt;
    this.idleSinceCommand = idleFor;
    this.idleSince = performance.now();
    if (this.idleTimer !== null) return;
    const check = () => {
      this.idleTimer = null;
      // Busy again (a command started after the last idle report): the next idle report re-arms.
      if (this.finished || this.idleSinceCommand !== this.commandStartedAt) return;
      const waited = performance.now() - this.idleSince;
      if (waited < IDLE_WORK_AFTER_MS) {
        this.idleTimer = setTimeout(check, IDLE_WORK_AFTER_MS - waited);
        this.idleTimer.unref();
        return;
      }
      // Ahead of a suspend that may follow; one that fails here fails again, and is reported, when a
      // suspend or restore needs the codec.
      void loadSnapshotCodec().catch(() => {});
      wantSpare(this.limits.memoryLimitBytes);
    };
    this.idleTimer = setTimeout(check, IDLE_WORK_AFTER_MS);
    this.idleTimer.unref();
  }

  report() {
    if (this.finished) return;
    if (this.forced !== null) {
      this.finish({ type: "failed", code: this.forced.code, message: this.forced.message, error: null });
      return;
    }
    // A cell that returned while its calls are still running is not done: those calls keep going and
    // the run completes once they settle (the run stays idle, and can be suspended, until then).
    if (this.outcome !== null && (this.outcome.type === "failed" || this.pending.size === 0)) {
      this.finish(this.outcome);
      return;
    }
    if (this.pending.size > 0) {
      // The host learnt of each request from its request message; only a restored run's first idle
      // lists them (the host has not seen them in this life of the run).
      const pending = this.announcePending ? [...this.pending.values()] : NOTHING;
      this.announcePending = false;
      flushOutbox(this, { type: "idle", runId: this.runId, pending, output: takeOutput(this) });
      this.scheduleIdleWork();
      return;
    }
    this.finish({
      type: "failed",
      code: null,
      message:
        "The cell is waiting on a promise that nothing can settle: no tool call or yield_control() is pending, so it would never finish. Await only promises that tools, namespaces or yield_control() return.",
      error: null,
    });
  }

  /** @param {NonNullable<GuestRun["outcome"]>} outcome */
  finish(outcome) {
    const output = takeOutput(this);
    if (outcome.type === "completed") {
      flushOutbox(this, {
        type: "completed",
        runId: this.runId,
        value: /** @type {any} */ (outcome.value),
        output,
      });
    } else {
      flushOutbox(this, {
        type: "failed",
        runId: this.runId,
        code: /** @type {any} */ (outcome.code),
        message: outcome.message,
        error: /** @type {any} */ (outcome.error),
        output,
      });
    }
    this.release();
  }

  /** Anything thrown while the VM ran: classify it, discard the VM, report once. */
  /** @param {unknown} error */
  crash(error) {
    if (this.finished) return;
    if (this.forced !== null) {
      this.report();
      return;
    }
    if (error instanceof JSException) {
      if (/out of memory/i.test(error.message)) {
        this.force(
          "memory_limit_exceeded",
          `The cell ran out of memory (memoryLimitBytes ${this.limits.memoryLimitBytes}); the VM was discarded. Work on less data at once.`,
        );
      } else if (/string too long|array too long|too many/i.test(error.message)) {
        // QuickJS raises these size limits as uncatchable errors, like out-of-memory.
        this.force(
          "memory_limit_exceeded",
          `The cell built a value larger than the engine allows (${error.message}); the VM was discarded. Work on less data at once.`,
        );
      } else if (/interrupted/i.test(error.message)) {
        this.force("timeout", "The cell was interrupted.");
      } else {
        this.force(
          "internal_error",
          `The sandbox failed outside guest code: ${error.name}: ${error.message}. The VM was discarded.`,
        );
      }
    } else if (error instanceof RangeError && /call stack/i.test(error.message)) {
      // The thread's own stack ran out under QuickJS's native recursion (a value nested tens of
      // thousands deep being stringified) before QuickJS's own stack check. The VM stopped mid-call:
      // dropped.
      this.force(
        "memory_limit_exceeded",
        "The cell nested values or calls deeper than the sandbox's stack allows; the VM was discarded. Flatten the data (or page it) before working on it.",
      );
    } else {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      this.force("internal_error", `The sandbox VM failed (${message}) and was discarded.`);
    }
    this.report();
  }

  release() {
    this.finished = true;
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    state.runs.delete(this.runId);
    // Build the next fresh VM now that this run is off the thread (from this run's VM when it can be
    // reset, see below: the spare is built after this returns).
    wantSpare(this.limits.memoryLimitBytes);
    startTakingImages();
    const vm = this.vm;
    // The strings this run holds in the VM go with it, unfreed: freeing them one by one first was work
    // for a memory that is discarded whole below.
    this.fixedStrings = null;
    this.strings = null;
    this.lastReply = null;
    this.requestIdHandles.clear();
    this.vm = null;
    this.control = null;
    const owned = this.owned;
    this.owned = null;
    // A run that ended on its own gives its VM back, made fresh (recycleVm); one that was forced to end
    // (a timeout, a memory limit, a crash) or that came from a snapshot drops it.
    const recycled =
      owned !== null &&
      owned.vm === vm &&
      this.forced === null &&
      recycleVm(owned, this.limits.memoryLimitBytes);
    if (!recycled && vm !== null) {
      try {
        dropVm(vm);
      } catch {
        // A VM that trapped may not dispose cleanly; it is unreachable either way.
      }
    }
    trimRecycledVms();
  }
}
