import { assertCodeModePayload } from "@codecell/engine";
import { fromWireFinish } from "./finish-reasons.js";
import { checkToolCallCount, toolCallIndex } from "./limits.js";
import { fromOpenAiUsage, toOpenAiMessages } from "./openai-messages.js";
import { readSseEvents } from "./sse.js";
import type { ModelCallOptions, ModelReply, ModelRequest, ModelUpstream } from "./turn.js";
import { answerJson, callUpstream, checkedCalls, eventJson, streamFailed } from "./upstream-answer.js";
import {
  bearerTransport,
  type UpstreamConnection,
  type UpstreamResponse,
  type UpstreamTransport,
} from "./upstream-transport.js";

// Where the Messages upstream imports them from.
export { checkedCalls, wholeReply } from "./upstream-answer.js";

/** An OpenAI-compatible Chat Completions server: requests go to `<baseUrl>/chat/completions`. */
export type OpenAiUpstreamOptions = UpstreamConnection;

/** An OpenAI-compatible Chat Completions server as the loop's upstream (over UpstreamTransport). */
export class OpenAiUpstream implements ModelUpstream {
  readonly providerName = "openai";
  readonly baseUrl: string;
  readonly #transport: UpstreamTransport;

  constructor(options: OpenAiUpstreamOptions) {
    this.#transport = bearerTransport(options, {
      path: "/chat/completions",
      answerKind: "a Chat Completions answer",
      baseUrlHint:
        "Check that agent.upstream.baseUrl is an OpenAI-compatible API root (it ends in /v1 for most).",
    });
    this.baseUrl = this.#transport.baseUrl;
  }

  /** The upstream's `GET /models` answer, or null when it has none. */
  models(signal: AbortSignal): Promise<unknown> {
    return this.#transport.getJson("/models", signal);
  }

  /** The body the loop sends for one model call; the final payload check runs on it (fail closed). */
  body(request: ModelRequest, stream: boolean): Record<string, unknown> {
    const tools = request.tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
    const body: Record<string, unknown> = {
      ...request.params,
      model: request.model,
      messages: toOpenAiMessages(request.messages),
      ...(tools.length ? { tools } : {}),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : { stream: false }),
    };
    if (request.codeModeDirectOnly !== null) {
      assertCodeModePayload(
        tools.map((tool) => tool.function.name),
        request.codeModeDirectOnly,
      );
    }
    return body;
  }

  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelReply> {
    return callUpstream(
      this.#transport,
      {
        body: (stream) => this.body(request, stream),
        whole: (text) => parseCompletion(text, this.#transport),
        stream: (response) => this.#readStream(response, options),
      },
      options,
    );
  }

  /**
   * Sends one body upstream as it is and returns the answer whatever its status (pass-through returns
   * it unchanged); only a failure to get an answer at all throws. `headers` go with this request only.
   */
  forward(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<UpstreamResponse> {
    return this.#transport.forward(body, signal, headers);
  }

  async #readStream(response: UpstreamResponse, options: ModelCallOptions): Promise<ModelReply> {
    const transport = this.#transport;
    const reply: ModelReply = { content: null, toolCalls: [], finishReason: "stop", usage: null, model: "" };
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    let events = 0;
    let finished = false;
    try {
      for await (const data of readSseEvents(
        response.body,
        options.signal,
        transport.limits.maxSseEventBytes,
      )) {
        events++;
        transport.traceSse(events, data);
        // Read on to the end of the body, which follows at once, so the connection is kept for the next call.
        if (data === "[DONE]" || finished) {
          finished = true;
          continue;
        }
        const chunk = eventJson(data, transport);
        if (typeof chunk.model === "string") reply.model = chunk.model;
        if (chunk.usage) reply.usage = fromOpenAiUsage(chunk.usage);
        if (chunk.error) throw streamFailed(chunk);
        const choice = (Array.isArray(chunk.choices) ? chunk.choices[0] : undefined) as
          | { delta?: Record<string, unknown>; finish_reason?: unknown }
          | undefined;
        if (!choice) continue;
        const delta = choice.delta ?? {};
        if (typeof delta.content === "string" && delta.content !== "") {
          reply.content = (reply.content ?? "") + delta.content;
          options.onTextDelta?.(delta.content);
          // The client takes what it was sent before more is read (backpressure).
          if (options.drained) await options.drained();
        }
        if (Array.isArray(delta.tool_calls)) {
          for (const part of delta.tool_calls as Array<Record<string, unknown>>) {
            // A small integer below the cap on calls per answer: `calls` never grows past that.
            const index = toolCallIndex(part.index, calls.length, transport.limits);
            if (!calls[index]) calls[index] = { id: "", name: "", arguments: "" };
            const call = calls[index]!;
            const fn = (part.function ?? {}) as { name?: unknown; arguments?: unknown };
            if (typeof part.id === "string") call.id = part.id;
            if (typeof fn.name === "string") call.name += fn.name;
            if (typeof fn.arguments === "string") call.arguments += fn.arguments;
          }
        }
        if (typeof choice.finish_reason === "string") {
          reply.finishReason = fromWireFinish("chat-completions", choice.finish_reason);
        }
      }
    } catch (error) {
      throw transport.streamFailure(error, options.signal);
    }
    reply.toolCalls = checkedCalls(calls.filter(Boolean), transport);
    return reply;
  }
}

/** A non-streamed Chat Completions answer as the loop's reply; anything else is `upstream_malformed`. */
export function parseCompletion(
  text: string,
  upstream: Pick<UpstreamTransport, "malformed" | "limits">,
): ModelReply {
  const parsed = answerJson(text, upstream) as Record<string, unknown>;
  const choice = (Array.isArray(parsed?.choices) ? parsed.choices[0] : undefined) as
    | { message?: Record<string, unknown>; finish_reason?: unknown }
    | undefined;
  const message = choice?.message;
  if (typeof message !== "object" || message === null)
    throw upstream.malformed("an answer without choices[0].message");
  const wireCalls = Array.isArray(message.tool_calls)
    ? (message.tool_calls as Array<Record<string, unknown>>)
    : [];
  checkToolCallCount(wireCalls.length, upstream.limits);
  const calls = wireCalls.map((call) => {
    const fn = (call.function ?? {}) as { name?: unknown; arguments?: unknown };
    return {
      id: typeof call.id === "string" ? call.id : "",
      name: typeof fn.name === "string" ? fn.name : "",
      arguments: typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
    };
  });
  return {
    content: typeof message.content === "string" ? message.content : null,
    toolCalls: checkedCalls(calls, upstream),
    finishReason: fromWireFinish("chat-completions", choice?.finish_reason),
    usage: fromOpenAiUsage(parsed.usage),
    model: typeof parsed.model === "string" ? parsed.model : "",
  };
}
