// A run's state machine, file by file: prepared-run (the run: exec and wait, each a segment) →
// run-segment (one segment's abort and progress) → drive-segment (the VM driven until it ends or waits)
// → nested-call-dispatch (each host request the VM makes) → nested-calls (a request turned into its
// call) → inflight-calls (the run's running calls and where their outcomes go) → suspend-segment (the
// segment's end: a result, or the run stored until a wait).
//
// This file is the machine's top: `ActiveRun` takes an exec or a wait (a control call), opens its
// segment, starts a VM for an exec or restores the stored one for a wait, has the driver run it with the
// segment's host requests dispatched, and settles how it ended. It also owns what outlives segments:
// the run's abort, its namespaces and request scope, its control records and spans.

import { setMaxListeners } from "node:events";
import type { GuestSurface, HostRequest } from "@codecell/bridge";
import type { CatalogTool, ToolCatalog } from "@codecell/catalog";
import {
  CodeModeError,
  type CodeModeResult,
  type CodeModeTelemetry,
  parseExecInput,
  parseWaitInput,
} from "@codecell/contract";
import { type ApiFileTable, createApiFileTable, type McpDeclarations } from "@codecell/mcp-declarations";
import { createCodeModeNamespaceRuntime, type NamespaceRuntime } from "@codecell/namespaces";
import type { SandboxRun, SettleOutcome } from "@codecell/sandbox";
import { type ClaimedRun, newRunId, principalOf, type RunScope } from "@codecell/snapshot-store";
import { type CellTypecheck, RunTypecheck, withDiagnostics } from "./cell-typecheck.js";
import { cellOf, hookMetadataOf } from "./control-input.js";
import { controlSpan, finishControl } from "./control-record.js";
import { driveSegment, ReadyQueue } from "./drive-segment.js";
import { type EngineShared, observe } from "./engine-shared.js";
import { explainGuestFailure } from "./guest-failure-hints.js";
import { buildGuestSurface } from "./guest-surface.js";
import { InflightCalls } from "./inflight-calls.js";
import { EXEC_TOOL_NAME, WAIT_TOOL_NAME } from "./model-surface.js";
import { dispatchHostRequest, type SegmentRequests } from "./nested-call-dispatch.js";
import { type RequestScope, requestParent } from "./nested-calls.js";
import { restoreLimitError } from "./restore-limits.js";
import { ResultShapes } from "./result-shapes.js";
import { failedResult, failureResult } from "./run-results.js";
import { openSegment, segmentSink } from "./run-segment.js";
import { newRunTelemetry } from "./run-telemetry.js";
import { type RunHostState, settleSegment } from "./suspend-segment.js";
import { startSpan, type TracedSpan } from "./tracing.js";
import type { TrajectoryHandle } from "./trajectory.js";
import type { ControlCall, ExecHookMetadata, ModelTool, PreparedRun, PrepareRunOptions } from "./types.js";

export class ActiveRun implements PreparedRun {
  readonly active = true;
  readonly reason = "active" as const;
  /** The guest surface and request scope of the latest segment; namespaces are rebuilt for each one. */
  #surface: GuestSurface;
  #scope: RequestScope;
  #namespacesKey: string;
  readonly #declarations: McpDeclarations;
  readonly #runScope: Omit<RunScope, "toolCallId">;
  readonly #abort = new AbortController();
  readonly #typecheck: RunTypecheck | null = null;

  constructor(
    readonly engine: EngineShared,
    readonly options: PrepareRunOptions,
    readonly catalog: ToolCatalog,
    declarations: McpDeclarations,
    namespaces: NamespaceRuntime,
    readonly modelTools: readonly ModelTool[],
  ) {
    this.#declarations = declarations;
    this.#surface = buildGuestSurface(catalog, declarations, namespaces);
    this.#namespacesKey = JSON.stringify(namespaces.namespaces);
    this.#scope = this.#requestScope(namespaces, new Map());
    if (engine.config.typecheck !== "off") {
      // The checker loads the compiler and this run's declarations while the model writes its first
      // cell, which is then a warm check. After this turn, so preparing the run returns at once.
      // One checker serves every session: its checks are taken round robin between principals.
      const { agentId, sessionKey } = options.context;
      const owner = principalOf({ agentId, sessionKey, sessionId: "", parentRunId: "", toolCallId: "" });
      const typecheck = new RunTypecheck(engine.typecheck, catalog, declarations, owner);
      this.#typecheck = typecheck;
      const surface = this.#surface;
      setImmediate(() => void typecheck.prepare(surface)).unref();
    }
    const { agentId, sessionKey, sessionId, runId } = options.context;
    this.#runScope = { agentId, sessionKey, sessionId, parentRunId: runId };
    // Every nested call in flight listens for the run's abort; there can be many at once.
    setMaxListeners(0, this.#abort.signal);
    const signal = options.context.signal;
    if (signal) {
      const onAbort = () => {
        this.#abort.abort();
        // Dropping the run's stored records is best effort: the abort above already ends the live run,
        // and a record left behind expires with its deadline.
        void engine.abort({ sessionId, runId }).catch(() => {});
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    }
  }

  hookMetadata(input: unknown): ExecHookMetadata {
    return hookMetadataOf(input);
  }

  /**
   * Namespace scopes are built for each exec and wait, from the registry as it is now: a plugin cleared
   * with `clearCodeModeNamespacesForPlugin` after this run was prepared leaves no global in the next
   * exec, and a resumed VM that still holds its global gets `invalid_input` for any call through it.
   * The surface is rebuilt only when the namespaces changed, so a run without changes reuses it.
   */
  #refreshNamespaces(): RequestScope {
    const { context } = this.options;
    const namespaces = createCodeModeNamespaceRuntime(
      {
        runId: context.runId,
        agentId: context.agentId,
        sessionKey: context.sessionKey,
        sessionId: context.sessionId,
        config: context.config,
        signal: context.signal,
      },
      this.catalog,
    );
    const key = JSON.stringify(namespaces.namespaces);
    if (key !== this.#namespacesKey) {
      this.#namespacesKey = key;
      this.#surface = buildGuestSurface(this.catalog, this.#declarations, namespaces);
    }
    this.#scope = this.#requestScope(namespaces, this.#scope.resolvedTargets);
    return this.#scope;
  }

  /**
   * Every scope comes from this one literal, so all have one hidden class (map): a scope spread from the
   * previous one got a map of its own in each exec, and the nested-call path's optimized code, which
   * reads the scope on every call, was thrown away (deoptimized) each time.
   */
  #requestScope(namespaces: NamespaceRuntime, resolvedTargets: Map<string, CatalogTool>): RequestScope {
    const { engine, options } = this;
    return {
      catalog: this.catalog,
      declarations: this.#declarations,
      namespaces,
      context: options.context,
      executor: options.executor,
      trajectory: engine.trajectory,
      redactInput: engine.redactInput,
      resolvedTargets,
      readApiFile: this.#readApiFile,
      observer: engine.observer,
      tracing: engine.tracing,
      cellStore: engine.cellStore,
    };
  }

  /** The virtual API files as `API.read` answers them (the mcp-declarations table), made on the first read. */
  #apiFileTable: ApiFileTable | null = null;
  readonly #readApiFile = (path: string): string => {
    this.#apiFileTable ??= createApiFileTable(this.#declarations.files);
    return this.#apiFileTable.read(path);
  };

  #telemetryBase(): CodeModeTelemetry {
    return newRunTelemetry(
      this.modelTools.map((tool) => tool.name),
      this.catalog,
    );
  }

  async exec(input: unknown, call: ControlCall): Promise<CodeModeResult> {
    const startedAt = Date.now();
    const { engine } = this;
    engine.stats.execCount++;
    const telemetry = this.#telemetryBase();
    telemetry.execCount = 1;
    // The run id the model will be given is chosen now, so every nested call of this exec is recorded
    // under it (and the executor sees the same id in exec and in every later wait).
    const runId = newRunId();
    const control = engine.trajectory.start(this.options.context.sessionId, {
      kind: "control",
      toolCallId: call.toolCallId,
      tool: EXEC_TOOL_NAME,
      codeModeRunId: runId,
      // The cell itself, through the same redaction hook as nested inputs, so a transcript can be replayed.
      input: engine.redactInput(EXEC_TOOL_NAME, cellOf(input)),
    });
    const span = controlSpan(engine, this.options.context, EXEC_TOOL_NAME, call, runId, input);
    let result: CodeModeResult;
    try {
      const hooked = call.beforeExec ? await call.beforeExec(input, hookMetadataOf(input)) : input;
      const request = parseExecInput(hooked, engine.config.languages, engine.config.maxCodeBytes);
      result = await this.#runExec(
        request.code,
        request.language,
        call,
        telemetry,
        startedAt,
        call.toolCallId,
        runId,
        span,
      );
      if (
        request.language === "javascript" &&
        result.status === "failed" &&
        result.code === "invalid_input"
      ) {
        result = await this.#typeScriptWithoutTheFlag(
          request.code,
          result,
          call,
          telemetry,
          startedAt,
          control,
          runId,
          span,
        );
      }
    } catch (error) {
      result = failureResult(error, telemetry, startedAt);
    }
    return finishControl(
      engine,
      this.options.context.sessionId,
      { control, tool: EXEC_TOOL_NAME, toolCallId: call.toolCallId, span, startedAt, knownRunId: runId },
      result,
    );
  }

  async wait(input: unknown, call: ControlCall): Promise<CodeModeResult> {
    const startedAt = Date.now();
    const { engine } = this;
    engine.stats.waitCount++;
    let telemetry = this.#telemetryBase();
    telemetry.waitCount = 1;
    const control = engine.trajectory.start(this.options.context.sessionId, {
      kind: "control",
      toolCallId: call.toolCallId,
      tool: WAIT_TOOL_NAME,
    });
    const span = controlSpan(engine, this.options.context, WAIT_TOOL_NAME, call, undefined, input);
    let result: CodeModeResult;
    let waitedRunId: string | undefined;
    try {
      const { runId } = parseWaitInput(input);
      waitedRunId = runId;
      span?.set({ "codecell.run.id": runId });
      engine.trajectory.annotate(control, { codeModeRunId: runId });
      const store = await engine.store;
      const restore = span ? startSpan("codecell.snapshot.restore", { parent: span }) : null;
      let claim: ClaimedRun;
      try {
        claim = await store.claim(runId, this.#runScope);
      } catch (error) {
        restore?.end(undefined, CodeModeError.is(error) ? error.code : "internal_error");
        throw error;
      }
      restore?.end({
        "codecell.run.id": runId,
        "codecell.snapshot.bytes": claim.snapshot.byteLength,
        "codecell.pending_calls": claim.pendingCalls.length,
      });
      observe(this.engine, "snapshot", { kind: "restore", bytes: claim.snapshot.byteLength });
      telemetry = claim.telemetry;
      telemetry.waitCount++;
      telemetry.snapshotEvents.push({ event: "resumed", runId });
      result = await this.#resume(claim, call, telemetry, startedAt, span);
    } catch (error) {
      result = failureResult(error, telemetry, startedAt);
    }
    return finishControl(
      engine,
      this.options.context.sessionId,
      {
        control,
        tool: WAIT_TOOL_NAME,
        toolCallId: call.toolCallId,
        span,
        startedAt,
        knownRunId: waitedRunId,
      },
      result,
    );
  }

  /**
   * A cell sent as JavaScript that does not parse as JavaScript but does as TypeScript (models often write
   * types without setting `language`). With TypeScript enabled it runs as TypeScript, and the telemetry
   * says so (`detectedLanguage`); nothing of the first attempt ran, since it failed before the VM started.
   * With TypeScript disabled the error says the cell looks like TypeScript and which setting allows it.
   */
  async #typeScriptWithoutTheFlag(
    code: string,
    failed: Extract<CodeModeResult, { status: "failed" }>,
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    control: TrajectoryHandle,
    runId: string,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { isTypeScriptOnly } = await import("@codecell/transpile");
    if (!(await isTypeScriptOnly(code).catch(() => false))) return failed;
    if (!this.engine.config.languages.includes("typescript")) {
      return {
        ...failed,
        error: `${failed.error} The cell looks like TypeScript (it parses once its types are removed), and TypeScript is not enabled here: write it as JavaScript without type annotations, or ask for the setting tools.codeMode.languages: ["javascript", "typescript"].`,
      };
    }
    telemetry.detectedLanguage = "typescript";
    this.engine.trajectory.updateInput(control, (recorded) => ({
      ...(typeof recorded === "object" && recorded !== null && !Array.isArray(recorded) ? recorded : {}),
      language: "typescript",
      detectedLanguage: "typescript",
    }));
    span?.set({ "codecell.detected_language": "typescript" });
    return this.#runExec(code, "typescript", call, telemetry, startedAt, call.toolCallId, runId, span);
  }

  async #runExec(
    code: string,
    language: "javascript" | "typescript",
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    toolCallId: string,
    runId: string,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const inflight = new InflightCalls(this.options.context.sessionId, engine.config.maxPendingToolCalls);
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    const segment = openSegment(this.#abort.signal, call, inflight);
    const parent = requestParent(toolCallId, "exec", runId, segment.progress, span, () => {
      segment.handedOut = true;
      ready.wake();
    });
    // What this exec's nested calls returned, so a failure can say what a name holds.
    const shapes = new ResultShapes();
    const scope = this.#refreshNamespaces();
    const surface = this.#surface;
    // "warn" checks while the cell runs (its findings are added at the end); "strict" first.
    const checking = this.#typecheckCell(code, language, surface);
    const checked = engine.config.typecheck === "strict" ? await checking : null;
    if (checked?.status === "checked" && checked.total > 0) {
      // Refused before the VM starts: nothing of the cell ran, no nested call was made.
      segment.release();
      const failed = failedResult("invalid_input", checked.strictMessage, telemetry, [], startedAt);
      return withDiagnostics(failed, checked);
    }
    if (checked?.status === "unfinished") {
      // Strict fails closed: a cell that could not be checked does not run. `runtime_unavailable`, as
      // for a sandbox that could not start in time: a part of the runtime the config asks for did not
      // do its work, the cell itself may be fine (so not `invalid_input`), it is not the cell's own
      // `timeout` (which counts its running and `limitFailures`), nor a bug (`internal_error`), and the
      // same cell may well pass once the checker is warm.
      segment.release();
      return failedResult("runtime_unavailable", checked.strictMessage, telemetry, [], startedAt);
    }
    let run: SandboxRun;
    try {
      run = engine.pool.run({
        ...this.#poolOptions({
          scope,
          inflight,
          ready,
          yieldIds,
          parent,
          telemetry,
          segment,
          stats: engine.stats,
        }),
        code,
        language,
        surface,
      });
    } catch (error) {
      segment.release();
      return failureResult(error, telemetry, startedAt);
    }
    inflight.attach(segmentSink(ready, segment, shapes));
    engine.inflight.set(runId, inflight);
    const end = await driveSegment(run, ready, segment).finally(segment.release);
    // A bare QuickJS TypeError gets the expression it is about (the JavaScript cell is what ran as is,
    // so only it has places to look up); a ReferenceError, in either language, what the name may be.
    if (end.type === "failed" && end.code === undefined) {
      end.message = await explainGuestFailure(end.message, language === "javascript" ? code : null, surface, {
        shapes,
        resolveTarget: (target) => {
          try {
            return scope.catalog.resolve(target).id;
          } catch {
            return null;
          }
        },
        namespaceToolId: (namespaceId, path) => {
          try {
            return scope.namespaces.resolveCall(namespaceId, path, []).toolId;
          } catch {
            return null;
          }
        },
      }).catch(() => end.message);
    }
    const result = await settleSegment(this.engine, this.#runScope, end, {
      runId,
      inflight,
      ready,
      yieldIds,
      telemetry,
      startedAt,
      claim: null,
      call,
      span,
    });
    return withDiagnostics(result, checked ?? (await checking));
  }

  /** The cell's type-check findings with typecheck "warn" or "strict"; null when off or not checked. */
  async #typecheckCell(
    code: string,
    language: "javascript" | "typescript",
    surface: GuestSurface,
  ): Promise<CellTypecheck> {
    // Made with the run when typecheck is on (see the constructor); null when it is off.
    return (await this.#typecheck?.check(code, language, surface)) ?? null;
  }

  async #resume(
    claim: ClaimedRun,
    call: ControlCall,
    telemetry: CodeModeTelemetry,
    startedAt: number,
    span: TracedSpan | null,
  ): Promise<CodeModeResult> {
    const { engine } = this;
    const store = await engine.store;
    // A record of another snapshot format is refused by the sandbox's restore below (see its codec).
    const hostState = (claim.hostState ?? { yieldRequestIds: [] }) as RunHostState;
    const overLimit = restoreLimitError(claim.snapshot.byteLength, hostState.memoryLimitBytes, engine.config);
    if (overLimit) {
      engine.inflight.get(claim.runId)?.abortAll(overLimit.message);
      engine.inflight.delete(claim.runId);
      // Failed, so deleted, as every failed run is; a finish that fails is left to the claim lease.
      await store.finish(claim, "failed").catch(() => {});
      return failureResult(overLimit, telemetry, startedAt);
    }
    let inflight = engine.inflight.get(claim.runId);
    if (!inflight) {
      inflight = new InflightCalls(this.options.context.sessionId, engine.config.maxPendingToolCalls);
      engine.inflight.set(claim.runId, inflight);
    }
    const ready = new ReadyQueue();
    const yieldIds = new Set<string>();
    // Results owed to the guest: yields continue now, settled calls go in, running ones follow.
    for (const requestId of hostState.yieldRequestIds) ready.push(requestId, { ok: true, value: null });
    // Calls running in another process that shares the store (another gateway replica).
    const elsewhere: string[] = [];
    for (const pending of claim.pendingCalls) {
      // A call handed out of the host was answered through the store: its entry stops `waiting`.
      if (pending.outcome) {
        engine.trajectory.settleHandedOut(
          this.options.context.sessionId,
          claim.runId,
          pending.callId,
          pending.outcome.ok
            ? undefined
            : { code: pending.outcome.error.code, error: pending.outcome.error.message },
        );
      }
      const outcome = pending.outcome ?? inflight.take(pending.callId);
      if (outcome) ready.push(pending.callId, outcome);
      else if (inflight.get(pending.callId)) continue;
      else if (store.sharesOutcomes) elsewhere.push(pending.callId);
      else {
        ready.push(pending.callId, {
          ok: false,
          error: {
            name: "Error",
            message: `Nested call to ${pending.toolId} was lost: it is not running in this process.`,
            code: "nested_tool_failed",
          },
        });
      }
    }
    inflight.attach((requestId, outcome, settled) => ready.push(requestId, outcome, settled.toolId));
    // Their outcomes arrive as the replica running them records them (or as "interrupted" once its
    // lease is gone); this segment delivers them like local ones until its deadline.
    let stopWatching: (() => Promise<void>) | null = null;
    if (elsewhere.length > 0) {
      const toolIds = new Map(claim.pendingCalls.map((pending) => [pending.callId, pending.toolId]));
      try {
        stopWatching = await store.watchOutcomes(claim.runId, elsewhere, (callId, outcome) =>
          ready.push(callId, outcome as SettleOutcome, toolIds.get(callId)),
        );
      } catch (error) {
        inflight.detach();
        // The watch's error is what the model hears; a claim not given back ends with its claim lease.
        await store.release(claim).catch(() => {});
        return failureResult(error, telemetry, startedAt);
      }
    }
    const segment = openSegment(this.#abort.signal, call, inflight);
    inflight.attach(segmentSink(ready, segment));
    const parent = requestParent(call.toolCallId, "wait", claim.runId, segment.progress, span, () => {
      segment.handedOut = true;
      ready.wake();
    });
    const scope = this.#refreshNamespaces();
    let run: SandboxRun;
    try {
      run = engine.pool.restore({
        ...this.#poolOptions({
          scope,
          inflight,
          ready,
          yieldIds,
          parent,
          telemetry,
          segment,
          stats: engine.stats,
        }),
        snapshot: claim.snapshot,
      });
    } catch (error) {
      segment.release();
      await stopWatching?.();
      // The restore's error is what the model hears; a record not ended here is left to its claim
      // lease and the sweep.
      await store.finish(claim, "failed").catch(() => {});
      return failureResult(error, telemetry, startedAt);
    }
    const end = await driveSegment(run, ready, segment).finally(segment.release);
    // An outcome recorded after this stays in the store, and the next claim reads it from there.
    await stopWatching?.();
    return settleSegment(this.engine, this.#runScope, end, {
      runId: claim.runId,
      inflight,
      ready,
      yieldIds,
      telemetry,
      startedAt,
      claim,
      call,
      span,
    });
  }

  /** What a segment's sandbox run or restore is given besides the cell or the snapshot. */
  #poolOptions(requests: SegmentRequests) {
    return {
      // Fairness between sessions: one session's spinning cells never hold every worker.
      owner: this.options.context.sessionId,
      limits: this.#limits(),
      // The cell's own wall-clock budget: the sandbox starts it when the VM is ready, so a
      // worker's cold start does not count (it has its own bound, reported runtime_unavailable).
      timeoutMs: this.engine.config.timeoutMs,
      signal: requests.segment.signal,
      onRequest: (request: HostRequest) => dispatchHostRequest(request, requests),
    };
  }

  #limits() {
    const { config } = this.engine;
    return {
      memoryLimitBytes: config.memoryLimitBytes,
      maxOutputBytes: config.maxOutputBytes,
      maxPendingToolCalls: config.maxPendingToolCalls,
      maxQueuedToolCalls: config.maxQueuedToolCalls,
      maxSnapshotBytes: config.maxSnapshotBytes,
      ...(config.images ? { images: { maxBytes: config.maxImageBytes } } : {}),
    };
  }
}
