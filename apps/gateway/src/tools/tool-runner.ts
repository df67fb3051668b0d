import { type BeforeToolCallEvent, CodeModeError, type JsonValue } from "@codecell/contract";
import { EXEC_TOOL_NAME, type ExecHookMetadata } from "@codecell/engine";
import type { McpConnector } from "@codecell/mcp-connector";
import type { CoreTool } from "../core-tools/core-tools.js";
import { requireApproval } from "../mcp/approvals.js";
import { CoreToolCallContext, PluginToolCallContext } from "../mcp/nested-call-request.js";
import type { LoadedPlugin } from "../plugins/load-plugins.js";
import { LOCAL_PRINCIPAL, ownerContext } from "../sessions/run-owner.js";
import type { ToolCallRequest } from "../sessions/session-host.js";

/** What the runner dispatches to: the gateway's three tool sources and its approval rule. */
export type ToolRunnerParts = {
  coreTools: readonly CoreTool[];
  plugins: readonly LoadedPlugin[];
  connector: McpConnector;
  needsApproval: (id: string, name: string) => boolean;
};

/** A hook's rewritten input, as JSON (a copy, so the hook keeps no handle on what the tool receives). */
function toJsonInput(value: unknown, pluginId: string): JsonValue {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    // A cycle or a BigInt: left undefined, and refused below with the plugin named.
  }
  if (json === undefined) {
    throw new CodeModeError(
      "nested_tool_failed",
      `The before_tool_call hook of plugin "${pluginId}" rewrote the input to something that is not JSON.`,
    );
  }
  return JSON.parse(json) as JsonValue;
}

/**
 * Runs the gateway's tool calls, nested and direct alike: policy has already chosen the caller's
 * catalog; here come the plugins' `before_tool_call` hooks, then approval, then the tool's own source
 * (a core tool, a plugin tool or a downstream MCP server).
 */
export class ToolRunner {
  readonly #parts: ToolRunnerParts;

  constructor(parts: ToolRunnerParts) {
    this.#parts = parts;
  }

  /**
   * Runs one tool from any source. The order, for nested and direct calls alike: policy (the caller's
   * catalog), then the plugins' `before_tool_call` hooks in plugin load order (each sees the input the
   * previous one left, and may block the call or rewrite its input), then approval (here, of the input
   * that will actually run), then the tool. Hook decisions and approvals are noted on the call's
   * trajectory entry.
   */
  async runTool(request: ToolCallRequest): Promise<unknown> {
    const { tool, toolId } = request;
    // Without any before_tool_call hook the input runs as it is, without a trip through the hook loop.
    const input = this.#hasBeforeToolCallHooks() ? await this.#beforeToolCall(request) : request.input;
    if (this.#parts.needsApproval(toolId, tool.name)) {
      // Left to the client's retry: the call is out of the run, which ignores what this returns.
      if ((await requireApproval(request.approvals, request, input)) === "deferred") return null;
      request.note?.("approved by the user");
    }
    return this.runApproved(request, input);
  }

  /**
   * Runs a call whose hooks and approval are done: now, or on the client's retry that approved it (a
   * call whose approval was deferred, see deferred-approvals.ts).
   */
  async runApproved(request: ToolCallRequest, input: JsonValue): Promise<unknown> {
    const { tool, toolId } = request;
    if (request.cancelled ? request.cancelled() : request.signal.aborted)
      throw new CodeModeError("aborted", `The call to ${toolId} was cancelled before it started.`);
    switch (tool.source) {
      case "core": {
        const core = this.#parts.coreTools.find((candidate) => candidate.name === tool.name);
        if (!core) break;
        return core.execute(input, new CoreToolCallContext(request));
      }
      case "plugin": {
        const plugin = this.#parts.plugins.find((candidate) => candidate.plugin.id === tool.owner);
        const pluginTool = plugin?.tool(tool.name);
        if (!pluginTool) break;
        return pluginTool.execute(input, new PluginToolCallContext(request));
      }
      case "mcp":
        return this.#parts.connector.callTool(tool.owner, tool.name, input ?? {}, {
          signal: request.signal,
          ...(request.progress ? { onProgress: request.progress } : {}),
        });
      default:
        break;
    }
    throw new CodeModeError("invalid_input", `The gateway has no tool ${toolId}.`);
  }

  #hasBeforeToolCallHooks(): boolean {
    for (const loaded of this.#parts.plugins) if (loaded.plugin.hooks?.before_tool_call) return true;
    return false;
  }

  /** Runs every plugin's `before_tool_call` hook; returns the input to run with, or throws a block. */
  #beforeToolCall(request: ToolCallRequest): Promise<JsonValue> {
    return this.#runBeforeHooks(
      {
        toolId: request.toolId,
        toolName: request.tool.name,
        source: request.tool.source,
        owner: request.tool.owner,
        input: request.input,
        via: request.via ?? "direct",
        sessionId: request.sessionId,
        run: request.run ?? {
          ...ownerContext({ principal: LOCAL_PRINCIPAL, conversation: request.sessionId }),
        },
      },
      "nested_tool_failed",
      request.note,
    );
  }

  /**
   * The plugins' `before_tool_call` hooks on the model's own code-mode exec call (spec: outer exec hook
   * events carry `toolKind: "code_mode_exec"` and `toolInputKind`): the exec input to run, or a throw
   * (`invalid_input`, with the plugin's reason) that fails the exec before anything runs.
   */
  async beforeExec(
    input: unknown,
    metadata: ExecHookMetadata,
    sessionId: string,
    run: BeforeToolCallEvent["run"],
  ): Promise<unknown> {
    if (!this.#hasBeforeToolCallHooks()) return input;
    return this.#runBeforeHooks(
      {
        toolId: EXEC_TOOL_NAME,
        toolName: EXEC_TOOL_NAME,
        source: "code_mode",
        owner: "codecell",
        // What the client sent, as JSON arrived: its exec input is JSON already.
        input: (input ?? null) as JsonValue,
        via: "direct",
        ...metadata,
        sessionId,
        run,
      },
      "invalid_input",
    );
  }

  async #runBeforeHooks(
    event: BeforeToolCallEvent,
    blockCode: "nested_tool_failed" | "invalid_input",
    note?: (text: string) => void,
  ): Promise<JsonValue> {
    let input = event.input;
    for (const loaded of this.#parts.plugins) {
      const hook = loaded.plugin.hooks?.before_tool_call;
      if (!hook) continue;
      const pluginId = loaded.plugin.id;
      let decision: unknown;
      try {
        decision = await hook.call(loaded.plugin.hooks, { ...event, input: structuredClone(input) });
      } catch (error) {
        // Fail closed: a hook that breaks cannot wave a call through.
        note?.(`blocked: the before_tool_call hook of plugin "${pluginId}" failed`);
        throw new CodeModeError(
          blockCode,
          `The before_tool_call hook of plugin "${pluginId}" failed (${(error as Error).message}), so ${event.toolId} was not called.`,
        );
      }
      if (decision === undefined || decision === null) continue;
      const answer = decision as { block?: unknown; reason?: unknown; input?: unknown };
      if (answer.block === true) {
        const reason = typeof answer.reason === "string" && answer.reason ? answer.reason : "no reason given";
        note?.(`blocked by the before_tool_call hook of plugin "${pluginId}": ${reason.slice(0, 300)}`);
        throw new CodeModeError(blockCode, `Blocked by plugin "${pluginId}": ${reason}`);
      }
      if ("input" in answer) {
        input = toJsonInput(answer.input, pluginId);
        note?.(`input rewritten by the before_tool_call hook of plugin "${pluginId}"`);
      }
    }
    return input;
  }
}
