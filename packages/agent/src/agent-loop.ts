import { randomBytes } from "node:crypto";
import {
  CodeModeError,
  type CodeModeOutput,
  type CodeModeResult,
  codeModeResultText,
  type HostTool,
  type JsonValue,
} from "@codecell/contract";
import type {
  CodeModeEngine,
  ExecHookMetadata,
  NestedToolCall,
  PreparedRun,
  RunContext,
  ToolExecutor,
  TrajectoryExport,
} from "@codecell/engine";
import type { McpServerDescription } from "@codecell/mcp-declarations";
import { AgentError } from "./agent-error.js";
import { conversationHash } from "./conversation-key.js";
import type { ConversationRecord, ConversationStore, HandedOutCall } from "./conversation-store.js";
import type { FinishReason, WireApi } from "./finish-reasons.js";
import { DEFAULT_LIMITS, upstreamLimitError } from "./limits.js";
import { completeTraced } from "./model-call-span.js";
import { flattenForeignToolHistory, matchToolResults, unansweredCallsError } from "./pending-calls.js";
import {
  addUsage,
  type ModelUpstream,
  type TurnMessage,
  type TurnTool,
  type TurnToolCall,
  type TurnUsage,
} from "./turn.js";

/** The host's side of a run: its own tools (core, plugins, MCP) before policy, and how to run them. */
export type HostRunTools = {
  tools: readonly HostTool[];
  allow?: readonly string[];
  deny?: readonly string[];
  mcpServers?: readonly McpServerDescription[];
  /** Runs the host's nested calls; client tools never reach it (the loop hands them out). */
  executor: ToolExecutor;
  /**
   * The host's hooks on the model's own exec call (the outer `code_mode_exec` event): the input to run,
   * or a throw that fails the exec before anything runs. The same hooks an MCP client's exec passes.
   */
  beforeExec?: (
    input: unknown,
    metadata: ExecHookMetadata,
    run: Pick<RunContext, "agentId" | "sessionKey" | "sessionId" | "runId">,
  ) => unknown;
};

export type AgentLoopOptions = {
  engine: CodeModeEngine;
  upstream: ModelUpstream;
  conversations: ConversationStore;
  /** The host's tools for one principal's run; `sessionId` is the run's engine session. */
  hostTools(principal: string, sessionId: string): HostRunTools;
  /** Upstream model calls one client request may make before it is stopped. Default 16. */
  maxModelTurns?: number;
  /**
   * Cells (exec calls) the model may run for one client request, over all its model calls. A model
   * answer that would pass it fails the request (upstream-class) before any of its cells runs. Default 64.
   */
  maxCellsPerRequest?: number;
  /** How long a finished conversation's hidden transcript is kept. Default 3600. */
  transcriptTtlSeconds?: number;
  /** The owner of client tools in catalog ids (`client:<owner>:<name>`). Default "app". */
  clientToolOwner?: string;
  /** The agent id of the runs (the snapshot store's scope). Default "codecell-agent". */
  agentId?: string;
};

/** One client request, in the loop's own terms (a front translated it from its wire format). */
export type AgentTurnRequest = {
  /** Who asks (a bearer token's name): conversations and runs belong to it. */
  principal: string;
  /** The client's conversation id, when it sends one; otherwise the visible messages identify it. */
  conversation?: string;
  model: string;
  /** The visible conversation as the client sends it, its tool calls and tool results included. */
  messages: readonly TurnMessage[];
  /** The client's own tools: they become `client` entries of the run's catalog. */
  clientTools: readonly TurnTool[];
  /** The client's other parameters, sent upstream as they are. */
  params: Readonly<Record<string, unknown>>;
  signal: AbortSignal;
  /** Present: upstream calls stream and the answer text is reported as it comes. */
  onTextDelta?: (text: string) => void;
  /**
   * Resolves once the client has taken what was written to it so far (`ResponseSink.drained`): a
   * streamed model call reads no further upstream until then.
   */
  drained?: () => Promise<void>;
  /**
   * Told the conversation's thread once the request holds the conversation, before any model call:
   * a streaming front sends it as a header before the first streamed byte.
   */
  onThread?: (threadId: string) => void;
  /** The API the client speaks, for the words of the loop's errors. Default "chat-completions". */
  api?: WireApi;
  /** Headers each model call sends beside the upstream's own (a Messages client's `anthropic-beta`). */
  upstreamHeaders?: Readonly<Record<string, string>>;
};

/** What the client gets: the answer, or its own tools to run (with `tool` messages in the next request). */
export type AgentTurnResult = {
  kind: "answer" | "client_tools";
  /** Why the answer ends: the last model call's reason for an answer, `tool_calls` for client tools. */
  finishReason: FinishReason;
  content: string | null;
  /** The client tool calls (their ids are the ones the client answers), for `client_tools`. */
  toolCalls: TurnToolCall[];
  usage: TurnUsage;
  model: string;
  /** The conversation's thread: the engine session its runs and trajectory are under. */
  threadId: string;
};

/** The options with their defaults filled in. */
type LoopSettings = Required<AgentLoopOptions>;

const EXEC = "exec";
const WAIT = "wait";
/**
 * How long a request's mark on its conversation lasts unless renewed (it is renewed every third of
 * this while the request runs): a process that dies holding it locks the conversation this long at most.
 */
const TAKEN_SECONDS = 30;

function newId(prefix: string): string {
  return `${prefix}${randomBytes(15).toString("base64url")}`;
}

/** Hands client-tool calls out of the run (see NestedToolCall.handOut) and keeps them per code-mode run. */
class HandOutExecutor implements ToolExecutor {
  readonly handedOut = new Map<string, Array<{ callId: string; name: string; arguments: string }>>();
  readonly mcpRequest: ToolExecutor["mcpRequest"];

  constructor(
    readonly host: ToolExecutor,
    readonly clientOwner: string,
  ) {
    this.mcpRequest = host.mcpRequest?.bind(host);
  }

  callTool(call: NestedToolCall): unknown {
    if (call.tool.source !== "client" || call.tool.owner !== this.clientOwner)
      return this.host.callTool(call);
    call.handOut();
    const runId = call.parent.codeModeRunId;
    const list = this.handedOut.get(runId) ?? [];
    list.push({ callId: call.callId, name: call.tool.name, arguments: JSON.stringify(call.input ?? {}) });
    this.handedOut.set(runId, list);
    return undefined;
  }
}

/**
 * The agent loop: code mode in front of a model for one client request. The model sees exec and wait;
 * its cells run in the engine with the client's tools and the host's in one catalog; a cell's call to
 * a client tool suspends the run and comes back to the client as an ordinary tool call, and the
 * client's next request (with the results) resumes it. The hidden turns are kept per conversation in
 * the conversation store, so the model sees its earlier cells, on any replica that shares the store.
 */
export class AgentLoop {
  readonly #options: LoopSettings;

  constructor(options: AgentLoopOptions) {
    this.#options = {
      maxModelTurns: 16,
      maxCellsPerRequest: DEFAULT_LIMITS.maxCellsPerRequest,
      transcriptTtlSeconds: 3600,
      clientToolOwner: "app",
      agentId: "codecell-agent",
      ...options,
    };
  }

  /** True when code mode is on for the host: otherwise a front passes requests through unchanged. */
  get codeModeEnabled(): boolean {
    return this.#options.engine.config.enabled;
  }

  /** The engine session of one principal's thread (its runs and trajectory). */
  sessionIdOf(principal: string, threadId: string): string {
    return `agent:${encodeURIComponent(principal)}/${encodeURIComponent(threadId)}`;
  }

  /** Exec and wait calls of a thread with the nested calls under them (this process's record). */
  trajectory(principal: string, threadId: string): TrajectoryExport {
    return this.#options.engine.exportTrajectory({ sessionId: this.sessionIdOf(principal, threadId) });
  }

  async drive(request: AgentTurnRequest): Promise<AgentTurnResult> {
    const { conversations } = this.#options;
    const { principal } = request;
    const key = await this.#keyOf(request);
    // Taken for the length of this request: a second request on the same conversation meanwhile is
    // refused rather than answered beside it (nothing runs twice, neither answer overwrites the
    // other's). The record stays where it is; the mark is renewed while the request runs.
    const holder = newId("req_");
    if (!(await conversations.take(principal, key, holder, TAKEN_SECONDS))) {
      throw new AgentError(
        "conflict",
        "Another request of this conversation is being answered right now. Wait for its answer, then send the conversation again.",
      );
    }
    const renew = setInterval(
      () => void conversations.take(principal, key, holder, TAKEN_SECONDS).catch(() => {}),
      (TAKEN_SECONDS * 1000) / 3,
    );
    renew.unref();
    try {
      // Read under the mark: a request that held it a moment ago may have moved the conversation on.
      const record = await this.#recordAt(request, key);
      const turn = new Turn(this.#options, request, record, record ? key : null);
      request.onThread?.(turn.threadId);
      try {
        return await turn.run();
      } catch (error) {
        // Something ran: what it did is kept for a retry of the same request, which goes on from there
        // instead of running it again (best effort: the request's own error is what the client hears).
        // Nothing ran: the record is as it was, untouched.
        if (turn.cellRan) await turn.checkpoint().catch(() => {});
        throw error;
      }
    } finally {
      clearInterval(renew);
      await conversations.release(principal, key, holder).catch(() => {});
    }
  }

  /** The stored record under `key` when it covers the start of this request's messages, else null. */
  async #recordAt(request: AgentTurnRequest, key: string): Promise<ConversationRecord | null> {
    const { messages } = request;
    const record = await this.#options.conversations.get(request.principal, key);
    return record !== null &&
      record.visibleCount <= messages.length &&
      conversationHash(messages.slice(0, record.visibleCount)) === record.visibleHash
      ? record
      : null;
  }

  /**
   * The key of the conversation this request continues: the conversation header's when sent, else the
   * key of a stored record found by the hash of the visible messages (all of them, for a retry of a
   * request that failed; or those up to the last assistant message, the endpoint's previous answer),
   * else the hash of all of them (a new conversation; the same request sent twice is the same one). A
   * record whose covered messages the client changed is ignored (the conversation starts afresh).
   */
  async #keyOf(request: AgentTurnRequest): Promise<string> {
    const { messages } = request;
    if (request.conversation !== undefined) return headerKey(request.conversation);
    let lastAssistant = -1;
    for (let index = messages.length - 1; index >= 0; index--) {
      if (messages[index]!.role === "assistant") {
        lastAssistant = index;
        break;
      }
    }
    const counts = [messages.length, lastAssistant + 1].filter(
      (count, index, all) => count > 0 && all.indexOf(count) === index,
    );
    for (const count of counts) {
      const key = hashKey(messages.slice(0, count));
      const record = await this.#recordAt(request, key);
      if (record?.visibleCount === count) return key;
    }
    return hashKey(messages);
  }
}

function headerKey(conversation: string): string {
  return `h:${conversation}`;
}

function hashKey(messages: readonly TurnMessage[]): string {
  return `v:${conversationHash(messages)}`;
}

/** One client request being driven: its run, its upstream messages and what it has done so far. */
class Turn {
  readonly threadId: string;
  readonly upstream: TurnMessage[];
  unanswered: TurnToolCall[];
  readonly usage: TurnUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  readonly text: string[] = [];
  model: string;
  /** A cell ran (or resumed) in this request: a failure keeps its result rather than forgetting it. */
  cellRan = false;
  /** Why the last model call ended. */
  finishReason: FinishReason = "stop";
  /** The client's messages for the model once the calls of its last answer have their results. */
  readonly deferred: TurnMessage[];
  /** What a resumed run's cell wrote before it handed calls out: it leads the cell's next result. */
  #earlierOutput: CodeModeOutput[];
  #modelTurns = 0;
  /** Cells the model asked for in this request so far. */
  #cells = 0;
  #run: PreparedRun | null = null;
  readonly #executor: HandOutExecutor;
  readonly #hostTools: HostRunTools;

  constructor(
    readonly options: LoopSettings,
    readonly request: AgentTurnRequest,
    readonly record: ConversationRecord | null,
    /** Where `record` is stored: once the answer is stored under another key, it is removed. */
    readonly recordKey: string | null,
  ) {
    this.threadId = record?.threadId ?? newId("thread_");
    this.upstream = record ? [...record.upstream] : [];
    this.unanswered = record ? [...record.unanswered] : [];
    this.deferred = record?.deferred ? [...record.deferred] : [];
    this.#earlierOutput = record?.pending?.output ?? [];
    this.model = request.model;
    this.#hostTools = options.hostTools(request.principal, this.#sessionId());
    this.#executor = new HandOutExecutor(this.#hostTools.executor, options.clientToolOwner);
  }

  #sessionId(): string {
    return `agent:${encodeURIComponent(this.request.principal)}/${encodeURIComponent(this.threadId)}`;
  }

  /** Who the run belongs to, as the engine and the host's hooks see it. */
  #runContext(): Pick<RunContext, "agentId" | "sessionKey" | "sessionId" | "runId"> {
    const sessionId = this.#sessionId();
    return {
      agentId: this.options.agentId,
      sessionKey: `principal:${encodeURIComponent(this.request.principal)}`,
      sessionId,
      runId: sessionId,
    };
  }

  ttlOf(record: ConversationRecord): number {
    return record.pending ? this.options.engine.config.snapshotTtlSeconds : this.options.transcriptTtlSeconds;
  }

  /** The run over the client's tools and the host's, prepared once per request. */
  get prepared(): PreparedRun {
    if (this.#run) return this.#run;
    const { request, options } = this;
    const host = this.#hostTools;
    const clientTools: HostTool[] = request.clientTools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      source: "client",
      owner: options.clientToolOwner,
    }));
    const context: RunContext = { ...this.#runContext(), signal: request.signal };
    this.#run = options.engine.prepareRun({
      tools: [...host.tools, ...clientTools],
      // The client's own tools are the caller's to offer: an operator's allow list names the host's.
      ...(host.allow ? { allow: [...host.allow, `client:${options.clientToolOwner}:*`] } : {}),
      ...(host.deny ? { deny: host.deny } : {}),
      ...(host.mcpServers ? { mcpServers: host.mcpServers } : {}),
      context,
      executor: this.#executor,
    });
    if (!this.#run.active) {
      throw new AgentError(
        "invalid_request",
        `Code mode is not active for this request (${this.#run.reason}): every tool was left out by policy.`,
      );
    }
    return this.#run;
  }

  async run(): Promise<AgentTurnResult> {
    const { request, record } = this;
    const newMessages = request.messages.slice(record?.visibleCount ?? 0);
    if (record?.pending) {
      const handedOut = await this.#resume(record.pending, newMessages);
      if (handedOut) return handedOut;
    } else {
      const trailing = trailingToolResults(newMessages);
      if (trailing.length > 0) {
        throw new AgentError(
          "conflict",
          `Tool results for calls that are not pending: ${trailing.map((message) => message.toolCallId).join(", ")}. Either the endpoint never asked for them, they were answered already, or the run waiting for them expired (tools.codeMode.snapshotTtlSeconds). Send the conversation without them.`,
        );
      }
      this.upstream.push(...(record ? newMessages : flattenForeignToolHistory(newMessages)));
    }
    for (;;) {
      const handedOut = await this.#answerToolCalls();
      if (handedOut) return handedOut;
      // Every call of the model's last answer has its result: the client's words may follow now.
      this.upstream.push(...this.deferred.splice(0));
      const reply = await this.#callModel();
      if (reply.toolCalls.length === 0) return this.#finish();
    }
  }

  /** Delivers the client's results into the suspended run and goes on with what the run does next. */
  async #resume(
    pending: NonNullable<ConversationRecord["pending"]>,
    newMessages: readonly TurnMessage[],
  ): Promise<AgentTurnResult | null> {
    // The results lead; what the client wrote after them (a Messages user turn of tool results and
    // text) goes to the model once the calls of its last answer are all answered.
    let leading = 0;
    while (newMessages[leading]?.role === "tool") leading++;
    if (!newMessages.some((message) => message.role === "tool")) {
      await this.#endPending(pending);
      throw unansweredCallsError(pending.calls, this.request.api ?? "chat-completions");
    }
    const results = matchToolResults(pending.calls, newMessages, this.request.api);
    this.deferred.push(...newMessages.slice(leading));
    const { engine } = this.options;
    this.cellRan = true;
    for (const call of pending.calls) {
      const result = results.get(call.visibleId)!;
      const answer = await engine.settleHandedOutCall(
        pending.runId,
        call.callId,
        result.isError
          ? { ok: false, message: result.content }
          : { ok: true, value: resultValue(result.content) },
      );
      if (answer === "run_gone") {
        throw new AgentError(
          "conflict",
          "The run waiting for these tool results is gone (it expired, tools.codeMode.snapshotTtlSeconds, or was aborted). Send the conversation without the tool results to start over.",
        );
      }
    }
    const control = this.unanswered[0]!;
    const result = await this.prepared.wait(
      { runId: pending.runId },
      { toolCallId: `${control.id}/resume-${pending.resumes + 1}`, signal: this.request.signal },
    );
    return this.#afterControl(control, result, pending.resumes + 1);
  }

  /**
   * A client answered a hand-out without any result: the run waiting for them is ended now rather than
   * left until its TTL, and the model's unanswered calls get a result that says so. The conversation is
   * stored without a pending run, so the same request sent again goes on from there.
   */
  async #endPending(pending: NonNullable<ConversationRecord["pending"]>): Promise<void> {
    const { engine, conversations, transcriptTtlSeconds } = this.options;
    await engine.abort({ sessionId: this.#sessionId() }, "client_sent_no_results");
    const names = pending.calls.map((call) => call.name).join(", ");
    for (const call of this.unanswered) {
      this.upstream.push({
        role: "tool",
        toolCallId: call.id,
        content: JSON.stringify({
          status: "aborted",
          error: `The cell was ended: the client answered without the results of its tool calls (${names}).`,
        }),
      });
    }
    this.unanswered = [];
    if (this.record && this.recordKey !== null) {
      const { pending: _ended, ...rest } = this.record;
      await conversations.put(
        this.request.principal,
        this.recordKey,
        { ...rest, upstream: this.upstream, unanswered: [] },
        transcriptTtlSeconds,
      );
    }
  }

  /** Runs the model's exec and wait calls in order; stops at the first that hands client tools out. */
  async #answerToolCalls(): Promise<AgentTurnResult | null> {
    while (this.unanswered.length > 0) {
      const call = this.unanswered[0]!;
      let input: unknown = call.arguments;
      try {
        input = JSON.parse(call.arguments);
      } catch {
        // The engine answers the model that its input was not an object (invalid_input).
      }
      this.cellRan = true;
      const control = { toolCallId: call.id, signal: this.request.signal };
      const hook = this.#hostTools.beforeExec;
      const run = this.#runContext();
      const result =
        call.name === WAIT
          ? await this.prepared.wait(input, control)
          : await this.prepared.exec(
              input,
              hook
                ? { ...control, beforeExec: (execInput, metadata) => hook(execInput, metadata, run) }
                : control,
            );
      const handedOut = await this.#afterControl(call, result, 0);
      if (handedOut) return handedOut;
    }
    return null;
  }

  /**
   * After an exec or wait: a run waiting on client tools goes to the client (the model's call stays
   * unanswered until they are back); anything else is the model's tool result.
   */
  async #afterControl(
    call: TurnToolCall,
    result: CodeModeResult,
    resumes: number,
  ): Promise<AgentTurnResult | null> {
    // What the cell wrote before a hand-out is the model's as much as what it writes after.
    const output = [...this.#earlierOutput, ...(result.output ?? [])];
    this.#earlierOutput = [];
    if (result.status === "waiting") {
      const pendingIds = new Set((result.pendingToolCalls ?? []).map((pending) => pending.callId));
      const calls = (this.#executor.handedOut.get(result.runId) ?? []).filter((handed) =>
        pendingIds.has(handed.callId),
      );
      this.#executor.handedOut.delete(result.runId);
      if (calls.length > 0) return this.#handOut(result.runId, calls, resumes, output);
    }
    const shown = output.length ? { ...result, output } : result;
    // The text names each image by type and size; the images themselves go beside it, kept in the
    // hidden transcript (so a later turn sends them again) and never in what the client is answered.
    const images = output.flatMap((item) =>
      item.type === "image" ? [{ mimeType: item.mimeType, data: item.data }] : [],
    );
    this.upstream.push({
      role: "tool",
      toolCallId: call.id,
      content: codeModeResultText(shown),
      ...(images.length ? { images } : {}),
    });
    this.unanswered.shift();
    return null;
  }

  async #handOut(
    runId: string,
    calls: Array<{ callId: string; name: string; arguments: string }>,
    resumes: number,
    output: CodeModeOutput[],
  ): Promise<AgentTurnResult> {
    const visible: HandedOutCall[] = calls.map((call) => ({ ...call, visibleId: newId("call_") }));
    const toolCalls = visible.map((call) => ({
      id: call.visibleId,
      name: call.name,
      arguments: call.arguments,
    }));
    const content = this.#content();
    await this.#save(
      { role: "assistant", content, toolCalls },
      { runId, calls: visible, resumes, ...(output.length ? { output } : {}) },
    );
    return {
      kind: "client_tools",
      finishReason: "tool_calls",
      content,
      toolCalls,
      usage: this.usage,
      model: this.model,
      threadId: this.threadId,
    };
  }

  async #finish(): Promise<AgentTurnResult> {
    const content = this.#content() ?? "";
    await this.#save({ role: "assistant", content });
    return {
      kind: "answer",
      finishReason: this.finishReason,
      content,
      toolCalls: [],
      usage: this.usage,
      model: this.model,
      threadId: this.threadId,
    };
  }

  #content(): string | null {
    return this.text.length ? this.text.join("\n\n") : null;
  }

  /** Stores the conversation as the client will send it next: its messages and this answer. */
  async #save(answer: TurnMessage, pending?: ConversationRecord["pending"]): Promise<void> {
    const covered = [...this.request.messages, answer];
    const record: ConversationRecord = {
      threadId: this.threadId,
      visibleCount: covered.length,
      visibleHash: conversationHash(covered),
      upstream: this.upstream,
      unanswered: this.unanswered,
      ...(pending ? { pending } : {}),
      ...(this.deferred.length ? { deferred: this.deferred } : {}),
    };
    const key =
      this.request.conversation !== undefined ? headerKey(this.request.conversation) : hashKey(covered);
    try {
      // A record a run waits on is in use: the store never evicts it for other records.
      await this.options.conversations.put(this.request.principal, key, record, this.ttlOf(record), {
        inUse: pending !== undefined,
      });
      // The conversation moved on to the new key: the record it came from is superseded (best effort,
      // it runs out with its TTL anyway).
      if (this.recordKey !== null && this.recordKey !== key) {
        await this.options.conversations.delete(this.request.principal, this.recordKey).catch(() => false);
      }
    } catch (error) {
      if (CodeModeError.is(error) && error.code === "snapshot_limit_exceeded") {
        throw new AgentError(
          "invalid_request",
          `This conversation's hidden turns could not be kept (${error.message}). Start a new conversation, or ask the operator to raise the limit the message names.`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /** After a failure once a cell ran: the state so far, found again by the same request sent again. */
  async checkpoint(): Promise<void> {
    const { request } = this;
    const record: ConversationRecord = {
      threadId: this.threadId,
      visibleCount: request.messages.length,
      visibleHash: conversationHash(request.messages),
      upstream: this.upstream,
      unanswered: this.unanswered,
      ...(this.deferred.length ? { deferred: this.deferred } : {}),
    };
    const key =
      request.conversation !== undefined ? headerKey(request.conversation) : hashKey(request.messages);
    await this.options.conversations.put(request.principal, key, record, this.options.transcriptTtlSeconds);
  }

  async #callModel() {
    const { options, request } = this;
    if (this.#modelTurns >= options.maxModelTurns) {
      throw new AgentError(
        "turn_limit",
        `The model made ${options.maxModelTurns} calls (agent.maxModelTurns) for this request without answering. What its cells did is kept: send the same request again to let it go on, or raise agent.maxModelTurns.`,
      );
    }
    this.#modelTurns++;
    const run = this.prepared;
    const directOnly = run.modelTools
      .map((tool) => tool.name)
      .filter((name) => name !== EXEC && name !== WAIT);
    const onTextDelta = request.onTextDelta;
    let streamedSegment = false;
    const reply = await completeTraced(
      options.upstream,
      {
        model: this.model,
        messages: this.upstream,
        tools: run.modelTools.map((tool) => ({
          name: tool.name,
          description: tool.description,
          parameters: tool.inputSchema,
        })),
        codeModeDirectOnly: directOnly,
        params: request.params,
      },
      {
        signal: request.signal,
        ...(request.upstreamHeaders ? { headers: request.upstreamHeaders } : {}),
        ...(request.drained ? { drained: request.drained } : {}),
        ...(onTextDelta
          ? {
              onTextDelta: (delta: string) => {
                // Text of several model turns reads as paragraphs, as the non-streamed answer joins it.
                if (!streamedSegment && this.text.length > 0) onTextDelta("\n\n");
                streamedSegment = true;
                onTextDelta(delta);
              },
            }
          : {}),
      },
    );
    addUsage(this.usage, reply.usage);
    if (reply.model) this.model = reply.model;
    this.finishReason = reply.finishReason;
    const unknown = reply.toolCalls.filter((call) => call.name !== EXEC && call.name !== WAIT);
    if (unknown.length > 0) {
      throw new AgentError(
        "upstream_malformed",
        `The upstream model called ${unknown.map((call) => `"${call.name}"`).join(", ")}, but it was offered only exec and wait. Send the request again; if it keeps happening, the model does not follow its tool list.`,
      );
    }
    // An answer the conversation record could never hold is the upstream's failure, not the client's.
    const answerBytes = reply.toolCalls.reduce(
      (sum, call) => sum + Buffer.byteLength(call.arguments),
      Buffer.byteLength(reply.content ?? ""),
    );
    const storeBytes = options.engine.config.maxSnapshotBytes;
    if (answerBytes > storeBytes) {
      throw new AgentError(
        "upstream_malformed",
        `The upstream model's answer was refused: its text and tool-call arguments come to ${answerBytes} bytes, more than a conversation's hidden transcript may hold (${storeBytes}, tools.codeMode.maxSnapshotBytes). Send the request again; if it keeps happening, ask the model for a shorter answer (max_tokens) or raise tools.codeMode.maxSnapshotBytes.`,
      );
    }
    // Checked before any of this answer's cells runs: a request lasts at most so many cell timeouts.
    const cells = reply.toolCalls.filter((call) => call.name === EXEC).length;
    if (this.#cells + cells > options.maxCellsPerRequest) {
      throw upstreamLimitError(
        `${this.#cells + cells} cells (exec calls) for one request`,
        "maxCellsPerRequest",
        options.maxCellsPerRequest,
      );
    }
    this.#cells += cells;
    if (reply.content) this.text.push(reply.content);
    this.upstream.push({
      role: "assistant",
      content: reply.content,
      // Kept beside the calls it led to, so the upstream gets its own chain back with their results.
      ...(reply.reasoning?.length ? { reasoning: reply.reasoning } : {}),
      ...(reply.toolCalls.length ? { toolCalls: reply.toolCalls } : {}),
    });
    this.unanswered = [...reply.toolCalls];
    return reply;
  }
}

/** Tool messages at the end of the client's new messages: results it expects to be acted on. */
function trailingToolResults(
  messages: readonly TurnMessage[],
): Array<Extract<TurnMessage, { role: "tool" }>> {
  const trailing: Array<Extract<TurnMessage, { role: "tool" }>> = [];
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!;
    if (message.role !== "tool") break;
    trailing.unshift(message);
  }
  return trailing;
}

/** A client's tool result as the cell sees it: the JSON value it spells, or the text itself. */
function resultValue(content: string): JsonValue {
  try {
    return JSON.parse(content) as JsonValue;
  } catch {
    return content;
  }
}
