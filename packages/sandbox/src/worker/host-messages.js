// @ts-check
import { parseHostToWorkerMessage } from "@codecell/bridge";
import { GuestRun } from "./guest-run.js";
import { restoreRun, suspendRun } from "./run-snapshot.js";
import { noteStartSurface } from "./vm-pool.js";
import { onInit } from "./worker-init.js";
import { failWorker, state } from "./worker-state.js";

// The host's messages to this worker, checked and routed: a settle to its run at once, every other
// message to the run operation (or the set-up) it asks for.

/**
 * Handle one host message synchronously: a settle (the message of every quick host call) costs no
 * promise and no microtask here; only `init` has anything to await.
 * @param {unknown} raw
 */
export function handle(raw) {
  try {
    onMessage(raw);
  } catch (error) {
    protocolViolation(error);
  }
}

/**
 * A protocol violation is a host bug: say so loudly on the way out rather than limp on.
 * @param {unknown} error
 */
export function protocolViolation(error) {
  failWorker(error);
}

/**
 * One host message. A settle (the message of every quick host call) takes a path of its own, kept small:
 * V8 inlines a function into an optimized caller only up to 460 bytes of bytecode, and optimizes a
 * function by itself only after thousands of calls. The whole switch below is over that size: with the
 * settle inside it, the worker's answer path would not be inlined into serveWaitingRuns (optimized in
 * the first cell, since it loops) and would run unoptimized for a fresh worker's first thousands of
 * calls.
 * @param {unknown} raw
 */
export function onMessage(raw) {
  const message = parseHostToWorkerMessage(raw);
  if (message.type === "settle") onSettle(message);
  else onControlMessage(message);
}

/**
 * A settle: the message of every quick host call. With nothing of its run in progress, enqueue runs it
 * at once.
 * @param {import("@codecell/bridge").HostToWorkerMessage & { type: "settle" }} message
 */
function onSettle(message) {
  state.runs
    .get(message.runId)
    ?.enqueue(() => state.runs.get(message.runId)?.settle(message.items, message.deadlineAt));
}

/**
 * Every host message but a settle.
 * @param {import("@codecell/bridge").HostToWorkerMessage} message
 */
function onControlMessage(message) {
  switch (message.type) {
    case "init":
      onInit(message, protocolViolation);
      return;
    case "start": {
      // With timeoutMs, getting the VM ready (a worker's first run compiles the prelude) is not the
      // cell's time: no deadline applies until the cell starts (see GuestRun.start).
      const setupDeadline = message.timeoutMs === undefined ? message.deadlineAt : Number.POSITIVE_INFINITY;
      const run = new GuestRun(message.runId, message.limits, setupDeadline, message.signal);
      run.timeoutMs = message.timeoutMs ?? null;
      state.runs.set(message.runId, run);
      noteStartSurface(message.surface, message.limits.memoryLimitBytes);
      run.enqueue(() => run.start(message.surface, message.code, message.language));
      return;
    }
    case "restore": {
      const run = new GuestRun(message.runId, message.limits, message.deadlineAt, message.signal);
      state.runs.set(message.runId, run);
      run.enqueue(() => restoreRun(run, message.snapshot));
      return;
    }
    case "settle":
      onSettle(message);
      return;
    case "suspend": {
      const run = state.runs.get(message.runId);
      if (run) run.enqueue(() => suspendRun(run));
      return;
    }
    case "dispose": {
      const run = state.runs.get(message.runId);
      if (run) run.enqueue(() => run.release());
      return;
    }
  }
}
