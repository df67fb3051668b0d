import type { BeforeToolCallEvent, HostTool, JsonValue, PluginToolContext } from "@codecell/contract";
import type { NestedToolCall, ToolProgress } from "@codecell/engine";
import type { ToolCallRequest } from "../sessions/session-host.js";
import type { ApprovalClient } from "./approvals.js";

/**
 * A nested call as the gateway's tool path sees it. `signal` reads through to the engine's call, whose
 * signal is made only when something reads it (an MCP tool, an approval, a tool that looks): a plugin
 * tool that never does costs no AbortController, which costs more than the rest of the call. Getters
 * live on the prototype here and in the tool contexts below, since an object literal with a getter is
 * built on V8's slow path (microseconds per object).
 */
export class NestedCallRequest implements ToolCallRequest {
  readonly tool: HostTool;
  readonly toolId: string;
  readonly input: JsonValue;
  readonly note: (text: string) => void;
  readonly progress: (update: ToolProgress) => void;
  /** The run belongs to its owner (context.sessionId), whichever MCP session continues it. */
  readonly runKey: string;
  readonly via: BeforeToolCallEvent["via"];
  readonly run: BeforeToolCallEvent["run"];
  readonly #call: NestedToolCall;

  constructor(
    call: NestedToolCall,
    readonly sessionId: string,
    readonly approvals: ApprovalClient,
  ) {
    this.#call = call;
    this.tool = call.tool;
    this.toolId = call.toolId;
    this.input = call.input;
    this.note = call.note;
    this.progress = call.progress;
    this.runKey = `${call.context.sessionId}/${call.parent.codeModeRunId}`;
    this.via = call.via;
    this.run = {
      agentId: call.context.agentId,
      sessionKey: call.context.sessionKey,
      sessionId: call.context.sessionId,
      runId: call.context.runId,
      codeModeRunId: call.parent.codeModeRunId,
      parentToolCallId: call.parent.toolCallId,
    };
  }

  get signal(): AbortSignal {
    return this.#call.signal;
  }

  cancelled(): boolean {
    return this.#call.aborted;
  }

  handOut(): { runId: string; callId: string } {
    this.#call.handOut();
    return { runId: this.#call.parent.codeModeRunId, callId: this.#call.callId };
  }
}

/** A core tool's context; `signal` is made when the tool reads it. */
export class CoreToolCallContext {
  readonly runKey?: string;
  readonly #request: ToolCallRequest;

  constructor(request: ToolCallRequest) {
    this.#request = request;
    if (request.runKey) this.runKey = request.runKey;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }
}

/** A plugin tool's context; `signal` is made when the tool reads it. */
export class PluginToolCallContext implements PluginToolContext {
  readonly sessionId: string;
  readonly #request: ToolCallRequest;

  constructor(request: ToolCallRequest) {
    this.#request = request;
    this.sessionId = request.sessionId;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }

  // An own function, not a method: a plugin may pass it on detached.
  readonly progress = (update: ToolProgress): void => {
    this.#request.progress?.(update);
  };
}
