import { randomBytes } from "node:crypto";
import { AgentError, type AgentErrorKind } from "./agent-error.js";
import type { AgentLoop, AgentTurnResult } from "./agent-loop.js";
import { chatParamsForMessages, chatToolChoiceForMessages } from "./chat-to-messages.js";
import { toWireFinish } from "./finish-reasons.js";
import { MessagesUpstream } from "./messages-upstream.js";
import { completeTraced, forwardTraced, type RelayedAnswer } from "./model-call-span.js";
import {
  contentText,
  fromOpenAiUsage,
  toOpenAiToolCall,
  toOpenAiUsage,
  toolFailure,
} from "./openai-messages.js";
import { OpenAiUpstream } from "./openai-upstream.js";
import { relayResponse } from "./relay.js";
import type { ModelUpstream, TurnMessage, TurnTool, TurnToolCall, TurnUsage } from "./turn.js";

/**
 * Where a front writes its answer: one JSON body, or an event stream. The host (the gateway's HTTP
 * route) implements it over its response object.
 */
export interface ResponseSink {
  json(status: number, body: unknown, headers?: Record<string, string>): void;
  /** Sends the status and headers of an event stream; later writes are its bytes. */
  startStream(headers?: Record<string, string>): void;
  write(text: string): void;
  /**
   * Resolves once the client has taken what was written (at once when it has, or when it went away):
   * streamed answers wait for it before reading more from the upstream. Without it, nothing waits.
   */
  drained?(): Promise<void>;
  end(): void;
  /** Told the thread the answer belongs to (also its `codecell-thread` header), for the host's records. */
  thread?(threadId: string): void;
  /** Told why the request failed, before the error is written (or not, when the client went away). */
  failed?(error: AgentError): void;
}

export type ChatCompletionsContext = {
  principal: string;
  /** The client's `codecell-session` header, when it sent one. */
  conversation?: string;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /**
   * Headers of the client's request that an upstream of the client's own API takes as they are (a
   * Messages client's `anthropic-beta`, which turns on the fields it sends); other upstreams ignore them.
   */
  upstreamHeaders?: Readonly<Record<string, string>>;
};

export type ChatCompletionsFrontOptions = {
  loop: AgentLoop;
  /**
   * The upstream of pass-through requests: the client's body goes as it is to a Chat Completions
   * upstream (an `OpenAiUpstream`), and is translated for any other (a `MessagesUpstream`).
   */
  upstream: ModelUpstream;
  /** Used when a request names no model. */
  defaultModel?: string;
};

/** Fields of a request the loop reads itself; every other one is sent upstream as the client sent it. */
const LOOP_FIELDS = new Set([
  "model",
  "messages",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "functions",
  "function_call",
  "stream",
  "stream_options",
]);

const ERROR_TYPES: Record<AgentErrorKind, string> = {
  invalid_request: "invalid_request_error",
  not_found: "invalid_request_error",
  conflict: "invalid_request_error",
  upstream_error: "upstream_error",
  upstream_unavailable: "upstream_error",
  upstream_malformed: "upstream_error",
  turn_limit: "invalid_request_error",
  aborted: "invalid_request_error",
  internal: "server_error",
};

/** An error as OpenAI's API shapes it, so clients raise their usual error types. */
export function openAiErrorBody(error: AgentError): unknown {
  return { error: { message: error.message, type: ERROR_TYPES[error.kind], param: null, code: error.kind } };
}

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

/**
 * OpenAI Chat Completions in front of the agent loop. Requests the loop does not take over (code mode
 * off, no tools, `tool_choice: "none"`) go upstream byte for byte and come back as the upstream sent
 * them; the rest are translated to the loop's terms and its result back to a completion (or chunks).
 */
export class ChatCompletionsFront {
  readonly #options: ChatCompletionsFrontOptions;

  constructor(options: ChatCompletionsFrontOptions) {
    this.#options = options;
  }

  async handle(body: unknown, context: ChatCompletionsContext, sink: ResponseSink): Promise<void> {
    let streaming = false;
    try {
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        throw invalid("The request body must be a JSON object with model and messages (Chat Completions).");
      }
      const request = body as Record<string, unknown>;
      const tools = request.tools;
      const passThrough =
        !this.#options.loop.codeModeEnabled ||
        tools === undefined ||
        (Array.isArray(tools) && tools.length === 0) ||
        request.tool_choice === "none";
      if (passThrough) {
        if (this.#options.upstream instanceof OpenAiUpstream) {
          await this.#passThrough(this.#options.upstream, request, context, sink);
        } else {
          await this.#translatedPassThrough(request, context, sink, () => {
            streaming = true;
          });
        }
        return;
      }
      const turn = this.#toTurn(request);
      const chunks = this.#chunkWriter(request, sink, turn.model);
      const result = await this.#options.loop.drive({
        ...turn,
        ...drainedOf(sink),
        api: "chat-completions",
        principal: context.principal,
        ...(context.conversation !== undefined ? { conversation: context.conversation } : {}),
        signal: context.signal,
        // The thread is known before the first model call: its header goes out with the first chunk.
        onThread: (threadId) => {
          sink.thread?.(threadId);
          chunks?.setHeaders({ "codecell-thread": threadId });
        },
        ...(chunks
          ? {
              onTextDelta: (text: string) => {
                streaming = true;
                chunks.text(text);
              },
            }
          : {}),
      });
      const headers = { "codecell-thread": result.threadId };
      const answer = answerOf(result);
      if (chunks) {
        streaming = true;
        chunks.finish(answer, headers);
      } else {
        sink.json(200, completionBody(answer), headers);
      }
    } catch (error) {
      const failure = AgentError.is(error)
        ? error
        : new AgentError("internal", `Internal error: ${(error as Error)?.message ?? String(error)}`);
      sink.failed?.(failure);
      if (context.signal.aborted) return;
      if (streaming) {
        // The status went out with the first chunk: the error is the stream's last event.
        sink.write(`data: ${JSON.stringify(openAiErrorBody(failure))}\n\n`);
        sink.end();
        return;
      }
      sink.json(failure.status, openAiErrorBody(failure), { ...failure.headers });
    }
  }

  #chunkWriter(request: Record<string, unknown>, sink: ResponseSink, model: string): ChunkWriter | null {
    if (request.stream !== true) return null;
    const includeUsage =
      (request.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    return new ChunkWriter(sink, includeUsage, model);
  }

  /** Byte for byte to a Chat Completions upstream, and its answer back as it came. */
  async #passThrough(
    upstream: OpenAiUpstream,
    request: Record<string, unknown>,
    context: ChatCompletionsContext,
    sink: ResponseSink,
  ): Promise<void> {
    const { defaultModel } = this.#options;
    // The body as the client sent it; only a missing model gets the configured default.
    const body = request.model === undefined && defaultModel ? { ...request, model: defaultModel } : request;
    await forwardTraced(upstream, body, context.signal, (response) =>
      relayResponse(
        response,
        sink,
        (text) => ({
          error: { message: text, type: "upstream_error", param: null, code: "upstream_malformed" },
        }),
        relayedAnswer,
      ),
    );
  }

  /**
   * One model call with the client's own tools and conversation, to an upstream of another API: the
   * request translated, the answer translated back (streamed as it comes when asked). `streamStarted`
   * is told when the first chunk goes out, so a failure after that is written as the stream's last event.
   */
  async #translatedPassThrough(
    request: Record<string, unknown>,
    context: ChatCompletionsContext,
    sink: ResponseSink,
    streamStarted: () => void,
  ): Promise<void> {
    if (request.functions !== undefined || request.function_call !== undefined) {
      throw invalid('"functions" and "function_call" are the old form of tools: send "tools" instead.');
    }
    const turn = this.#toTurn(request);
    const tools = request.tools === undefined ? [] : toTurnTools(request.tools);
    const choice =
      this.#options.upstream instanceof MessagesUpstream
        ? chatToolChoiceForMessages(request.tool_choice, request.parallel_tool_calls)
        : {
            ...(request.tool_choice !== undefined ? { tool_choice: request.tool_choice } : {}),
            ...(request.parallel_tool_calls !== undefined
              ? { parallel_tool_calls: request.parallel_tool_calls }
              : {}),
          };
    const chunks = this.#chunkWriter(request, sink, turn.model);
    const reply = await completeTraced(
      this.#options.upstream,
      {
        model: turn.model,
        messages: turn.messages,
        tools,
        codeModeDirectOnly: null,
        params: { ...turn.params, ...choice },
      },
      {
        signal: context.signal,
        ...drainedOf(sink),
        ...(chunks
          ? {
              onTextDelta: (text: string) => {
                streamStarted();
                chunks.text(text);
              },
            }
          : {}),
      },
    );
    const answer: Answer = {
      content: reply.content,
      toolCalls: reply.toolCalls,
      finishReason: toWireFinish("chat-completions", reply.finishReason),
      usage: reply.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
      model: reply.model || turn.model,
    };
    if (chunks) {
      streamStarted();
      chunks.finish(answer, {});
    } else {
      sink.json(200, completionBody(answer));
    }
  }

  #toTurn(request: Record<string, unknown>) {
    const model =
      typeof request.model === "string" && request.model ? request.model : this.#options.defaultModel;
    if (!model) {
      throw invalid(
        'The request names no model: set "model", or agent.upstream.model in the gateway config.',
      );
    }
    if (request.n !== undefined && request.n !== 1) {
      throw invalid("Code mode answers one choice per request: leave out n, or set it to 1.");
    }
    if (!Array.isArray(request.messages) || request.messages.length === 0) {
      throw invalid('"messages" must be a non-empty array of Chat Completions messages.');
    }
    const own: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(request)) if (!LOOP_FIELDS.has(key)) own[key] = value;
    // A Chat Completions upstream takes the client's parameters as they are; another gets them mapped.
    // (A Responses upstream maps Chat Completions parameters itself.)
    const params = this.#options.upstream instanceof MessagesUpstream ? chatParamsForMessages(own) : own;
    return {
      model,
      messages: request.messages.map(toTurnMessage),
      clientTools: request.tools === undefined ? [] : toTurnTools(request.tools),
      params,
    };
  }
}

/** The sink's `drained`, as the loop's and a model call's options take it. */
export function drainedOf(sink: ResponseSink): { drained?: () => Promise<void> } {
  return sink.drained ? { drained: () => sink.drained?.() ?? Promise.resolve() } : {};
}

function toTurnTools(tools: unknown): TurnTool[] {
  if (!Array.isArray(tools))
    throw invalid('"tools" must be an array of { type: "function", function: {...} }.');
  const names = new Set<string>();
  return tools.map((tool, index) => {
    const fn = (tool as { type?: unknown; function?: Record<string, unknown> } | null)?.function;
    if (
      (tool as { type?: unknown } | null)?.type !== "function" ||
      typeof fn?.name !== "string" ||
      !fn.name
    ) {
      throw invalid(
        `tools[${index}] must be { type: "function", function: { name, description, parameters } }.`,
      );
    }
    if (names.has(fn.name)) throw invalid(`tools[${index}]: the name "${fn.name}" is given twice.`);
    names.add(fn.name);
    return {
      name: fn.name,
      description: typeof fn.description === "string" ? fn.description : "",
      parameters: fn.parameters ?? { type: "object", properties: {} },
    };
  });
}

function toTurnMessage(message: unknown, index: number): TurnMessage {
  const fields = (typeof message === "object" && message !== null ? message : {}) as Record<string, unknown>;
  const content = fields.content;
  switch (fields.role) {
    case "system":
    case "developer":
      return {
        role: "system",
        content: typeof content === "string" || Array.isArray(content) ? content : "",
      };
    case "user":
      if (typeof content !== "string" && !Array.isArray(content)) {
        throw invalid(`messages[${index}]: a user message needs content (a string or content parts).`);
      }
      return { role: "user", content };
    case "assistant": {
      const calls = Array.isArray(fields.tool_calls) ? fields.tool_calls : [];
      const toolCalls: TurnToolCall[] = calls.map((call, callIndex) => {
        const { id, function: fn } = (call ?? {}) as {
          id?: unknown;
          function?: { name?: unknown; arguments?: unknown };
        };
        if (typeof id !== "string" || typeof fn?.name !== "string") {
          throw invalid(`messages[${index}].tool_calls[${callIndex}] needs an id and function.name.`);
        }
        return {
          id,
          name: fn.name,
          arguments: typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
        };
      });
      const text = content === null || content === undefined ? null : contentText(content);
      return { role: "assistant", content: text || null, ...(toolCalls.length ? { toolCalls } : {}) };
    }
    case "tool": {
      if (typeof fields.tool_call_id !== "string")
        throw invalid(`messages[${index}]: a tool message needs tool_call_id.`);
      const text = contentText(content);
      const failure = toolFailure(text);
      return {
        role: "tool",
        toolCallId: fields.tool_call_id,
        content: failure ?? text,
        ...(failure !== null ? { isError: true } : {}),
      };
    }
    default:
      throw invalid(
        `messages[${index}] has role ${JSON.stringify(fields.role)}; use system, developer, user, assistant or tool.`,
      );
  }
}

function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString("base64url")}`;
}

/** What a passed-through completion says of itself, for its span (nothing when it is not one). */
function relayedAnswer(parsed: unknown): RelayedAnswer {
  const answer = parsed as { model?: unknown; usage?: unknown; choices?: Array<{ finish_reason?: unknown }> };
  const usage = fromOpenAiUsage(answer?.usage);
  const finish = Array.isArray(answer?.choices) ? answer.choices[0]?.finish_reason : undefined;
  return {
    ...(typeof answer?.model === "string" ? { responseModel: answer.model } : {}),
    ...(usage ? { inputTokens: usage.promptTokens, outputTokens: usage.completionTokens } : {}),
    ...(typeof finish === "string" ? { finishReasons: [finish] } : {}),
  };
}

/** One answer in Chat Completions terms: the loop's result, or a translated model call's reply. */
type Answer = {
  content: string | null;
  toolCalls: readonly TurnToolCall[];
  finishReason: string;
  usage: TurnUsage;
  model: string;
};

function answerOf(result: AgentTurnResult): Answer {
  return {
    content: result.content,
    toolCalls: result.toolCalls,
    finishReason: toWireFinish("chat-completions", result.finishReason),
    usage: result.usage,
    model: result.model,
  };
}

function completionBody(result: Answer): unknown {
  return {
    id: completionId(),
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: result.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: result.content,
          refusal: null,
          ...(result.toolCalls.length ? { tool_calls: result.toolCalls.map(toOpenAiToolCall) } : {}),
        },
        logprobs: null,
        finish_reason: result.finishReason,
      },
    ],
    usage: toOpenAiUsage(result.usage),
  };
}

/** Chat Completions chunks on a sink: the stream starts with the first text (or at the end). */
class ChunkWriter {
  readonly #id = completionId();
  readonly #created = Math.floor(Date.now() / 1000);
  #started = false;
  #model: string;
  /** Headers of the stream, known before its first byte (the thread's). */
  #headers: Record<string, string> = {};

  constructor(
    readonly sink: ResponseSink,
    readonly includeUsage: boolean,
    model: string,
  ) {
    this.#model = model;
  }

  #chunk(delta: Record<string, unknown>, finishReason: string | null): void {
    this.#send({
      id: this.#id,
      object: "chat.completion.chunk",
      created: this.#created,
      model: this.#model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(this.includeUsage ? { usage: null } : {}),
    });
  }

  #send(value: unknown): void {
    this.sink.write(`data: ${JSON.stringify(value)}\n\n`);
  }

  setHeaders(headers: Record<string, string>): void {
    Object.assign(this.#headers, headers);
  }

  #start(headers?: Record<string, string>): void {
    if (this.#started) return;
    this.#started = true;
    this.sink.startStream({ ...this.#headers, ...headers });
    this.#chunk({ role: "assistant", content: "" }, null);
  }

  text(text: string): void {
    this.#start();
    this.#chunk({ content: text }, null);
  }

  finish(result: Answer, headers: Record<string, string>): void {
    this.#model = result.model;
    this.#start(headers);
    if (result.toolCalls.length) {
      this.#chunk(
        {
          tool_calls: result.toolCalls.map((call, index) => ({ index, ...toOpenAiToolCall(call) })),
        },
        null,
      );
    }
    this.#chunk({}, result.finishReason);
    if (this.includeUsage) {
      this.#send({
        id: this.#id,
        object: "chat.completion.chunk",
        created: this.#created,
        model: this.#model,
        choices: [],
        usage: toOpenAiUsage(result.usage),
      });
    }
    this.sink.write("data: [DONE]\n\n");
    this.sink.end();
  }
}
