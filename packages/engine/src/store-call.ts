// A cell's `store`, `load`, `store.keys()` or `store.delete()`: a call on the host like a tool call (it
// takes a slot of the run's table, and while the run is suspended its outcome goes to the snapshot store,
// so a run resumed on another replica gets it), answered by the engine's CellStore. Its trajectory entry
// and span carry the operation, the key and the value's size; the value only when the host records
// inputs (`tracing.recordInputs`).

import type { HostRequest } from "@codecell/bridge";
import { CodeModeError, type JsonValue } from "@codecell/contract";
import { type CellStoreAnswer, cellStoreScope } from "./cell-store.js";
import { InflightCall } from "./inflight-calls.js";
import type { RequestParent, RequestScope } from "./nested-calls.js";
import { startSpan, type TracedSpan } from "./tracing.js";
import type { TrajectoryHandle } from "./trajectory.js";

export const STORE_TOOL_ID = "codecell:store";

type StoreRequest = Extract<HostRequest, { kind: "store" }>;

const GUEST_NAMES: Record<StoreRequest["op"], string> = {
  set: "store",
  get: "load",
  delete: "store.delete",
  keys: "store.keys",
};

export class StoreCall extends InflightCall {
  #entry: TrajectoryHandle | null = null;
  #span: TracedSpan | null = null;

  constructor(
    readonly request: StoreRequest,
    readonly scope: RequestScope,
    readonly parent: RequestParent,
  ) {
    super(request.requestId, STORE_TOOL_ID);
  }

  /** What the trajectory and a span show of the request: the value's size, its JSON only when recorded. */
  #recordedInput(): JsonValue {
    const { op, key, value } = this.request;
    const input: Record<string, JsonValue> = { op };
    if (key !== undefined) input.key = key;
    if (op === "set" && value !== undefined) {
      input.bytes = Buffer.byteLength(JSON.stringify(value), "utf8");
      if (this.scope.tracing.recordInputs) input.value = this.scope.redactInput(STORE_TOOL_ID, value);
    }
    return input;
  }

  protected run(): void {
    const { scope, parent, request } = this;
    const input = this.#recordedInput();
    this.#entry = scope.trajectory.startNested(
      scope.context.sessionId,
      parent.toolCallId,
      parent.codeModeRunId,
      STORE_TOOL_ID,
      "store",
      request.requestId,
      input,
      this.startedAtMs,
    );
    if (parent.span !== null) {
      const name = GUEST_NAMES[request.op];
      this.#span = startSpan(`execute_tool ${name}`, {
        parent: parent.span,
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": name,
          "gen_ai.tool.call.id": request.requestId,
          "gen_ai.tool.type": "function",
          "codecell.tool.id": STORE_TOOL_ID,
          "codecell.tool.source": "codecell",
          "codecell.tool.via": "store",
          "codecell.store.key": request.key,
          "codecell.run.id": parent.codeModeRunId,
        },
      });
    }
    this.#perform().then(
      (answer) => this.#completed(answer),
      (error: unknown) => this.#failed(error),
    );
  }

  #perform(): Promise<CellStoreAnswer> {
    const { cellStore, context } = this.scope;
    const where = cellStoreScope(context);
    const { op, key, value } = this.request;
    switch (op) {
      case "set":
        return value === undefined
          ? cellStore.delete(where, key as string, "store(key, value)")
          : cellStore.set(where, key as string, value);
      case "get":
        return cellStore.get(where, key as string);
      case "delete":
        return cellStore.delete(where, key as string);
      case "keys":
        return cellStore.keys(where);
    }
  }

  #completed(answer: CellStoreAnswer): void {
    const { trajectory } = this.scope;
    if (this.#entry !== null) {
      if (this.request.op === "get") {
        trajectory.updateInput(this.#entry, (recorded) => ({
          ...(recorded as Record<string, JsonValue>),
          bytes: answer.bytes,
          found: answer.bytes > 0,
        }));
      }
      trajectory.end(this.#entry, "completed");
    }
    this.#span?.end({ "codecell.outcome": "completed", "codecell.store.bytes": answer.bytes });
    this.#span = null;
    this.#observe("completed");
    this.finish({ ok: true, value: answer.value });
  }

  #failed(error: unknown): void {
    const data = CodeModeError.is(error)
      ? error.toData()
      : {
          name: "Error",
          message: `${GUEST_NAMES[this.request.op]}: the stored values could not be reached: ${error instanceof Error ? error.message : String(error)}`,
          code: "internal_error" as const,
        };
    if (this.#entry !== null) {
      this.scope.trajectory.end(this.#entry, "failed", { code: data.code, error: data.message });
    }
    this.#span?.end({ "codecell.outcome": "failed" }, data.code, data.message);
    this.#span = null;
    this.#observe("failed");
    this.finish({ ok: false, error: data });
  }

  #observe(outcome: "completed" | "failed"): void {
    const { observer } = this.scope;
    if (observer === null || observer.nestedCallEnded === undefined) return;
    try {
      observer.nestedCallEnded({
        toolId: STORE_TOOL_ID,
        source: "codecell",
        via: "store",
        outcome,
        durationMs: Date.now() - this.startedAtMs,
      });
    } catch {
      // Observing is advisory.
    }
  }
}
