import { AgentError } from "./agent-error.js";
import type { AgentLoop, AgentTurnResult } from "./agent-loop.js";
import {
  fromMessagesRequest,
  fromMessagesTools,
  fromMessagesUsage,
  messagesErrorBody,
  toMessagesContent,
  toMessagesUsage,
  type UpstreamApi,
} from "./anthropic-messages.js";
import { type ChatCompletionsContext, drainedOf, type ResponseSink } from "./chat-completions-front.js";
import { toWireFinish } from "./finish-reasons.js";
import { MessagesStreamWriter, messageId } from "./messages-stream.js";
import { MessagesUpstream } from "./messages-upstream.js";
import { completeTraced, forwardTraced, type RelayedAnswer } from "./model-call-span.js";
import { relayResponse } from "./relay.js";
import type { ModelReply, ModelUpstream, TurnTool } from "./turn.js";

export type MessagesFrontOptions = {
  loop: AgentLoop;
  /**
   * The upstream of pass-through requests: the client's body goes as it is to a Messages upstream (a
   * `MessagesUpstream`), and is translated for any other.
   */
  upstream: ModelUpstream;
  /** The format the upstream speaks: sampling parameters and content parts are written for it. */
  upstreamApi: UpstreamApi;
  /** Used when a request names no model. */
  defaultModel?: string;
};

/** Fields of a Messages request the front reads itself. */
const LOOP_FIELDS = new Set(["model", "messages", "system", "tools", "tool_choice", "stream"]);

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

/**
 * The Messages request's other parameters in the upstream's terms: as they are for a Messages
 * upstream; for Chat Completions the ones with a counterpart there, the ones that only steer how
 * Anthropic's own models work dropped (see the README's table), and a clear refusal for the rest.
 */
export function messagesParams(request: Record<string, unknown>, api: UpstreamApi): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    if (LOOP_FIELDS.has(key) || value === undefined) continue;
    if (api === "messages") {
      refuseInCodeMode(key);
      params[key] = value;
      continue;
    }
    switch (key) {
      case "max_tokens":
      case "temperature":
      case "top_p":
        params[key] = value;
        break;
      case "stop_sequences":
        params.stop = value;
        break;
      case "metadata": {
        const user = (value as { user_id?: unknown } | null)?.user_id;
        if (typeof user === "string") params.user = user;
        break;
      }
      // Extended thinking and its context edits belong to Anthropic's models; a Chat Completions
      // model reasons (or not) as it is made to, and has no thinking blocks to edit.
      case "thinking":
      case "context_management":
        break;
      case "output_config":
        Object.assign(params, outputConfigParams(value));
        break;
      default:
        throw invalid(
          `"${key}" has no counterpart in Chat Completions, which this gateway's upstream speaks (agent.upstream.api): leave it out.`,
        );
    }
  }
  return params;
}

/**
 * `output_config` for Chat Completions: a JSON schema `format` becomes `response_format`; `effort` is
 * dropped, since `reasoning_effort` fails on the models that do not reason.
 */
function outputConfigParams(value: unknown): Record<string, unknown> {
  const format = (value as { format?: unknown } | null)?.format as Record<string, unknown> | undefined;
  if (format === undefined || format === null) return {};
  if (format.type !== "json_schema" || typeof format.schema !== "object" || format.schema === null) {
    throw invalid(
      '"output_config.format" must be { type: "json_schema", schema } to be sent to a Chat Completions upstream (agent.upstream.api).',
    );
  }
  return { response_format: { type: "json_schema", json_schema: { name: "output", schema: format.schema } } };
}

/** Remote MCP servers would give the model tools besides exec and wait: a Messages upstream must not get them. */
function refuseInCodeMode(key: string): void {
  if (key === "mcp_servers") {
    throw invalid(
      '"mcp_servers" would show the model tools besides exec and wait: add those servers to the gateway config (mcpServers) instead, where cells call them.',
    );
  }
}

/**
 * Server-held message threads (`thread`, as the Anthropic SDK's `toolRunner` sends by default) are not
 * held here: the run's hidden turns are what the endpoint keeps, and a thread's short request would
 * reach the model without them. The error code is the one the SDK reads to send the whole conversation
 * again without a thread.
 */
function refuseThread(request: Record<string, unknown>): void {
  const field =
    request.thread !== undefined
      ? "thread"
      : request.previous_message_id !== undefined
        ? "previous_message_id"
        : null;
  if (field === null) return;
  throw new AgentError(
    "invalid_request",
    `This endpoint does not hold message threads ("${field}"): send the whole conversation in "messages" without "thread" (the Anthropic SDK does so by itself on this error).`,
    { details: { error_code: "thread_unsupported_request", unsupported: [field] } },
  );
}

/** A Messages `tool_choice` in Chat Completions terms, for a request passed through to such an upstream. */
function chatToolChoice(choice: unknown): Record<string, unknown> {
  if (choice === undefined) return {};
  const fields = (typeof choice === "object" && choice !== null ? choice : {}) as Record<string, unknown>;
  const parallel = fields.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (fields.type) {
    case "auto":
      return { tool_choice: "auto", ...parallel };
    case "any":
      return { tool_choice: "required", ...parallel };
    case "none":
      return { tool_choice: "none" };
    case "tool":
      if (typeof fields.name === "string")
        return { tool_choice: { type: "function", function: { name: fields.name } }, ...parallel };
      break;
  }
  throw invalid('"tool_choice" must be { type: "auto" | "any" | "none" } or { type: "tool", name }.');
}

/** One answer in the front's terms: what the loop or a passed-through model call gave. */
type Answer = {
  content: string | null;
  toolCalls: AgentTurnResult["toolCalls"];
  stopReason: string;
  usage: AgentTurnResult["usage"];
  model: string;
};

function messageBody(answer: Answer): unknown {
  return {
    id: messageId(),
    type: "message",
    role: "assistant",
    model: answer.model,
    content: toMessagesContent(answer.content, answer.toolCalls),
    stop_reason: answer.stopReason,
    stop_sequence: null,
    usage: toMessagesUsage(answer.usage),
  };
}

/** What a passed-through message says of itself, for its span (nothing when it is not one). */
function relayedMessage(parsed: unknown): RelayedAnswer {
  const answer = parsed as { model?: unknown; usage?: unknown; stop_reason?: unknown } | null;
  const usage = fromMessagesUsage(answer?.usage);
  return {
    ...(typeof answer?.model === "string" ? { responseModel: answer.model } : {}),
    ...(usage ? { inputTokens: usage.promptTokens, outputTokens: usage.completionTokens } : {}),
    ...(typeof answer?.stop_reason === "string" ? { finishReasons: [answer.stop_reason] } : {}),
  };
}

/**
 * The Anthropic Messages API (`POST /v1/messages`) in front of the agent loop. The request's tools
 * become client tools, a client tool a cell calls comes back as `tool_use` blocks with
 * `stop_reason: "tool_use"`, and the `tool_result` blocks of the next request resume the run. Requests
 * the loop does not take over (code mode off, no tools, `tool_choice: { type: "none" }`) go to the
 * upstream model as they are, translated when it speaks another format.
 */
export class MessagesFront {
  readonly #options: MessagesFrontOptions;

  constructor(options: MessagesFrontOptions) {
    this.#options = options;
  }

  async handle(body: unknown, context: ChatCompletionsContext, sink: ResponseSink): Promise<void> {
    let writer: MessagesStreamWriter | null = null;
    try {
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        throw invalid(
          "The request body must be a JSON object with model, max_tokens and messages (Messages API).",
        );
      }
      const request = body as Record<string, unknown>;
      refuseThread(request);
      const { loop, upstreamApi } = this.#options;
      const tools = request.tools;
      const passThrough =
        !loop.codeModeEnabled ||
        tools === undefined ||
        (Array.isArray(tools) && tools.length === 0) ||
        (request.tool_choice as { type?: unknown } | undefined)?.type === "none";
      const model =
        typeof request.model === "string" && request.model ? request.model : this.#options.defaultModel;
      if (!model) {
        throw invalid(
          'The request names no model: set "model", or agent.upstream.model in the gateway config.',
        );
      }
      const { upstream } = this.#options;
      // The client's betas turn on the fields it sends; only an upstream of its own API reads them.
      const upstreamHeaders = upstreamApi === "messages" ? (context.upstreamHeaders ?? {}) : {};
      if (passThrough && upstream instanceof MessagesUpstream) {
        // The upstream speaks this API: the body as the client sent it, the answer as it came.
        const forwarded = request.model === model ? request : { ...request, model };
        await forwardTraced(
          upstream,
          forwarded,
          context.signal,
          (response) =>
            relayResponse(
              response,
              sink,
              (text) => ({ type: "error", error: { type: "api_error", message: text } }),
              relayedMessage,
            ),
          upstreamHeaders,
        );
        return;
      }
      const messages = fromMessagesRequest(request, upstreamApi);
      const params = messagesParams(request, upstreamApi);
      const clientTools = tools === undefined ? [] : fromMessagesTools(tools);
      writer = request.stream === true ? new MessagesStreamWriter(sink, model) : null;
      const onTextDelta = writer ? { onTextDelta: (text: string) => writer?.text(text) } : {};
      if (passThrough) {
        const answer = await this.#passThrough(request, model, messages, clientTools, params, context, {
          ...onTextDelta,
          ...drainedOf(sink),
          ...(Object.keys(upstreamHeaders).length ? { headers: upstreamHeaders } : {}),
        });
        if (writer) writer.finish(answer);
        else sink.json(200, messageBody(answer));
        return;
      }
      const result = await loop.drive({
        ...onTextDelta,
        ...drainedOf(sink),
        api: "messages",
        ...(Object.keys(upstreamHeaders).length ? { upstreamHeaders } : {}),
        // The thread is known before the first model call: its header goes out with the first event.
        onThread: (threadId) => {
          sink.thread?.(threadId);
          writer?.setHeaders({ "codecell-thread": threadId });
        },
        principal: context.principal,
        ...(context.conversation !== undefined ? { conversation: context.conversation } : {}),
        model,
        messages,
        clientTools,
        params,
        signal: context.signal,
      });
      const answer: Answer = {
        content: result.content,
        toolCalls: result.toolCalls,
        stopReason: toWireFinish("messages", result.finishReason),
        usage: result.usage,
        model: result.model,
      };
      const headers = { "codecell-thread": result.threadId };
      if (writer) writer.finish(answer, headers);
      else sink.json(200, messageBody(answer), headers);
    } catch (error) {
      const failure = AgentError.is(error)
        ? error
        : new AgentError("internal", `Internal error: ${(error as Error)?.message ?? String(error)}`);
      sink.failed?.(failure);
      if (context.signal.aborted) return;
      if (writer?.started) writer.fail(failure);
      else sink.json(failure.status, messagesErrorBody(failure), { ...failure.headers });
    }
  }

  /** One model call with the client's own tools, the client's conversation as it is. */
  async #passThrough(
    request: Record<string, unknown>,
    model: string,
    messages: ReturnType<typeof fromMessagesRequest>,
    tools: TurnTool[],
    params: Record<string, unknown>,
    context: ChatCompletionsContext,
    stream: {
      onTextDelta?: (text: string) => void;
      drained?: () => Promise<void>;
      headers?: Readonly<Record<string, string>>;
    },
  ): Promise<Answer> {
    const choice =
      this.#options.upstreamApi === "messages"
        ? request.tool_choice === undefined
          ? {}
          : { tool_choice: request.tool_choice }
        : chatToolChoice(request.tool_choice);
    // A model call like the loop's: its `chat <model>` span, its trace context in the request's headers.
    const reply: ModelReply = await completeTraced(
      this.#options.upstream,
      { model, messages, tools, codeModeDirectOnly: null, params: { ...params, ...choice } },
      { signal: context.signal, ...stream },
    );
    return {
      content: reply.content,
      toolCalls: reply.toolCalls,
      stopReason: toWireFinish("messages", reply.finishReason),
      usage: reply.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
      model: reply.model || model,
    };
  }
}
