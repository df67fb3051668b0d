import { assertCodeModePayload } from "@codecell/engine";
import { AgentError } from "./agent-error.js";
import { fromMessagesUsage, toolUseInput } from "./anthropic-messages.js";
import { fromWireFinish } from "./finish-reasons.js";
import { checkToolCallCount, jsonDepth, MAX_ANSWER_DEPTH, type UpstreamLimits } from "./limits.js";
import { checkedCalls, wholeReply } from "./openai-upstream.js";
import { readSseEvents } from "./sse.js";
import type {
  ModelCallOptions,
  ModelReply,
  ModelRequest,
  ModelUpstream,
  TurnMessage,
  TurnUsage,
} from "./turn.js";
import type { UpstreamDebug } from "./upstream-debug.js";
import { type UpstreamResponse, UpstreamTransport, upstreamMessage } from "./upstream-transport.js";

export type MessagesUpstreamOptions = {
  /** The API root, such as `https://api.anthropic.com/v1`; requests go to `<baseUrl>/messages`. */
  baseUrl: string;
  /** Sent as `x-api-key`. */
  apiKey?: string;
  /** Sent with every request, after the defaults (so an `anthropic-version` here wins). */
  headers?: Readonly<Record<string, string>>;
  /** How long one upstream request may take, answer included. Default 120000. */
  timeoutMs?: number;
  /** `max_tokens` of a request that sets none (the Messages API requires it). Default 4096. */
  defaultMaxTokens?: number;
  debug?: UpstreamDebug;
  /** Bounds on each answer (bytes, SSE event size, tool calls); `DEFAULT_LIMITS` for those not given. */
  limits?: Partial<UpstreamLimits>;
  /** Name the upstream's address in errors clients get. Default false. */
  showAddress?: boolean;
};

const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_TOKENS = 4096;
/** The Messages API version the bodies below are written for. */
const ANTHROPIC_VERSION = "2023-06-01";

type Block = Record<string, unknown>;
type WireMessage = { role: "user" | "assistant" | "system"; content: Block[] };

/** Blocks of the model's own reasoning: kept with the turn they came in, sent back with it as they were. */
const THINKING_TYPES = new Set(["thinking", "redacted_thinking"]);

/** The thinking blocks among an assistant turn's stored reasoning (a Responses upstream's items are not). */
function thinkingBlocks(reasoning: readonly unknown[] | undefined): Block[] {
  return (reasoning ?? []).filter((block): block is Block =>
    THINKING_TYPES.has(String((block as Block)?.type)),
  );
}

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

/** The text of a system message's content: a string, or its text parts. */
function systemText(content: unknown): string {
  if (typeof content === "string") return content;
  return (content as unknown[])
    .map((part) => {
      const fields = (part ?? {}) as Block;
      if (fields.type !== "text" || typeof fields.text !== "string") {
        throw invalid("A system message sent to a Messages upstream may hold text only.");
      }
      return fields.text;
    })
    .join("\n\n");
}

/** A data URL's media type and base64 payload, or null. */
function dataUrl(url: string): { mediaType: string; data: string } | null {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, data: match[2]! } : null;
}

/**
 * One content part of a user message as a Messages block: text and image blocks as they are (a
 * Messages front wrote them), Chat Completions' `text` and `image_url` parts translated; anything else
 * (audio, files) has no block here and is refused.
 */
function userBlock(part: unknown): Block {
  const fields = (part ?? {}) as Block;
  if (fields.type === "text" && typeof fields.text === "string") {
    return fields.cache_control === undefined ? { type: "text", text: fields.text } : fields;
  }
  if (fields.type === "image") return fields;
  if (fields.type === "image_url") {
    const url = (fields.image_url as { url?: unknown } | undefined)?.url;
    if (typeof url === "string") {
      const inline = dataUrl(url);
      if (inline) {
        return { type: "image", source: { type: "base64", media_type: inline.mediaType, data: inline.data } };
      }
      if (/^https?:\/\//.test(url)) return { type: "image", source: { type: "url", url } };
    }
    throw invalid(
      "An image_url part must be a base64 data URL or an http(s) URL to be sent to a Messages upstream.",
    );
  }
  throw invalid(
    `A ${JSON.stringify(fields.type)} content part cannot be sent to this gateway's upstream, which speaks the Messages API (agent.upstream.api): send text and images only.`,
  );
}

/**
 * The loop's messages as a Messages request's `system` and `messages`. System messages join the
 * top-level system prompt, except those a Messages client placed among its messages, which stay where
 * they stand; tool results become `tool_result` blocks at the head of the next user turn; turns of the
 * same role are merged, as the API wants them alternating. An assistant turn's thinking blocks lead it,
 * signatures and all, as the API requires of a turn whose tool calls are answered.
 */
export function toMessagesWire(messages: readonly TurnMessage[]): {
  system: string;
  messages: WireMessage[];
} {
  const system: string[] = [];
  const wire: WireMessage[] = [];
  const push = (role: WireMessage["role"], blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = wire.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else wire.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case "system": {
        const text = systemText(message.content);
        if (text && message.inline) push("system", [{ type: "text", text }]);
        else if (text) system.push(text);
        break;
      }
      case "user":
        push(
          "user",
          typeof message.content === "string"
            ? message.content
              ? [{ type: "text", text: message.content }]
              : []
            : message.content.map(userBlock),
        );
        break;
      case "assistant":
        push("assistant", [
          ...thinkingBlocks(message.reasoning),
          ...(message.content ? [{ type: "text", text: message.content }] : []),
          ...(message.toolCalls ?? []).map((call) => ({
            type: "tool_use",
            id: call.id,
            name: call.name,
            input: toolUseInput(call.arguments),
          })),
        ]);
        break;
      default:
        push("user", [
          {
            type: "tool_result",
            tool_use_id: message.toolCallId,
            // A cell's images go in the tool_result itself, after the text that names them.
            content: message.images?.length
              ? [
                  { type: "text", text: message.content },
                  ...message.images.map((image) => ({
                    type: "image",
                    source: { type: "base64", media_type: image.mimeType, data: image.data },
                  })),
                ]
              : message.content,
            ...(message.isError ? { is_error: true } : {}),
          },
        ]);
    }
  }
  // A tool result must lead its user turn: a user text merged in before it moves behind.
  for (const turn of wire) {
    if (turn.role === "user") {
      turn.content.sort((a, b) => Number(b.type === "tool_result") - Number(a.type === "tool_result"));
    }
  }
  return { system: system.join("\n\n"), messages: wire };
}

/** The Messages API (Anthropic's, or a server that speaks it) as the loop's upstream (over UpstreamTransport). */
export class MessagesUpstream implements ModelUpstream {
  readonly providerName = "anthropic";
  readonly baseUrl: string;
  readonly #transport: UpstreamTransport;
  readonly #defaultMaxTokens: number;

  constructor(options: MessagesUpstreamOptions) {
    this.#transport = new UpstreamTransport({
      baseUrl: options.baseUrl,
      path: "/messages",
      headers: {
        "content-type": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
        ...(options.apiKey ? { "x-api-key": options.apiKey } : {}),
        ...options.headers,
      },
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(options.debug ? { debug: options.debug } : {}),
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.showAddress ? { showAddress: true } : {}),
      answerKind: "a Messages API answer",
      baseUrlHint:
        'Check that agent.upstream.baseUrl is a Messages API root such as "https://api.anthropic.com/v1" and agent.upstream.api is "messages".',
    });
    this.baseUrl = this.#transport.baseUrl;
    this.#defaultMaxTokens = options.defaultMaxTokens ?? DEFAULT_MAX_TOKENS;
  }

  /** The upstream's `GET /models` answer, or null when it has none. */
  models(signal: AbortSignal): Promise<unknown> {
    return this.#transport.getJson("/models", signal);
  }

  /** The body the loop sends for one model call; the final payload check runs on it (fail closed). */
  body(request: ModelRequest, stream: boolean): Record<string, unknown> {
    const { system, messages } = toMessagesWire(request.messages);
    const tools = request.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.parameters,
    }));
    const body: Record<string, unknown> = {
      max_tokens: this.#defaultMaxTokens,
      ...request.params,
      model: request.model,
      ...(system ? { system } : {}),
      messages,
      ...(tools.length ? { tools } : {}),
      stream,
    };
    if (request.codeModeDirectOnly !== null) {
      // Remote MCP servers would give the model tools of their own, beside exec and wait.
      if (body.mcp_servers !== undefined) {
        throw new Error("Code mode sends the model exactly exec and wait; mcp_servers would add others.");
      }
      assertCodeModePayload(
        tools.map((tool) => tool.name),
        request.codeModeDirectOnly,
      );
    }
    return body;
  }

  async complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelReply> {
    const stream = options.onTextDelta !== undefined;
    let body: Record<string, unknown>;
    try {
      body = this.body(request, stream);
    } catch (error) {
      if (AgentError.is(error)) throw error;
      throw new AgentError("internal", (error as Error).message, { cause: error });
    }
    const response = await this.#transport.post(body, options.signal, options.headers);
    if (!stream || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
      return wholeReply(this.#parse(await this.#transport.readText(response, options.signal)), options);
    }
    return this.#readStream(response, options);
  }

  /** Sends one body as it is and returns the answer whatever its status (a Messages front's pass-through). */
  forward(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<UpstreamResponse> {
    return this.#transport.forward(body, signal, headers);
  }

  #parse(text: string): ModelReply {
    if (jsonDepth(text, MAX_ANSWER_DEPTH) > MAX_ANSWER_DEPTH) {
      throw this.#transport.malformed(`an answer nested more than ${MAX_ANSWER_DEPTH} levels deep`);
    }
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw this.#transport.malformed(`an answer that is not JSON (${text.slice(0, 80) || "empty"})`);
    }
    if (!Array.isArray(parsed?.content)) throw this.#transport.malformed("an answer without a content array");
    const text_: string[] = [];
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    const thinking: Block[] = [];
    for (const block of parsed.content as Block[]) {
      if (block?.type === "text" && typeof block.text === "string") text_.push(block.text);
      else if (block?.type === "tool_use") {
        calls.push({
          id: typeof block.id === "string" ? block.id : "",
          name: typeof block.name === "string" ? block.name : "",
          arguments: JSON.stringify(block.input ?? {}),
        });
      }
      // Thinking blocks are the model's own: kept for the hidden turn, nothing of them reaches the client.
      else if (THINKING_TYPES.has(String(block?.type))) thinking.push(block);
    }
    return {
      ...(thinking.length ? { reasoning: thinking } : {}),
      content: text_.length ? text_.join("") : null,
      toolCalls: checkedCalls(calls, this.#transport),
      finishReason: fromWireFinish("messages", parsed.stop_reason),
      usage: fromMessagesUsage(parsed.usage),
      model: typeof parsed.model === "string" ? parsed.model : "",
    };
  }

  /**
   * The Messages event stream: `message_start` (model, input usage), text and tool_use blocks built
   * from their deltas, `message_delta` (stop reason, output usage), `message_stop`; an `error` event
   * fails the call.
   */
  async #readStream(response: UpstreamResponse, options: ModelCallOptions): Promise<ModelReply> {
    const transport = this.#transport;
    const reply: ModelReply = { content: null, toolCalls: [], finishReason: "stop", usage: null, model: "" };
    const blocks = new Map<
      number,
      { type: string; id: string; name: string; json: string; thinking?: Block }
    >();
    const usage: Record<string, unknown> = {};
    let events = 0;
    let toolUses = 0;
    try {
      for await (const data of readSseEvents(
        response.body,
        options.signal,
        transport.limits.maxSseEventBytes,
      )) {
        events++;
        transport.traceSse(events, data);
        let event: Block;
        try {
          event = JSON.parse(data) as Block;
        } catch {
          throw transport.malformed(`an SSE event that is not JSON (${data.slice(0, 80)})`);
        }
        switch (event.type) {
          case "message_start": {
            const message = (event.message ?? {}) as Block;
            if (typeof message.model === "string") reply.model = message.model;
            Object.assign(usage, message.usage);
            break;
          }
          case "content_block_start": {
            const block = (event.content_block ?? {}) as Block;
            // Tool calls past the cap fail the answer here, before more blocks are held.
            if (block.type === "tool_use") checkToolCallCount(++toolUses, transport.limits);
            blocks.set(Number(event.index), {
              type: String(block.type),
              id: typeof block.id === "string" ? block.id : "",
              name: typeof block.name === "string" ? block.name : "",
              json: "",
              // A thinking block is built from its deltas; a redacted one comes whole.
              ...(THINKING_TYPES.has(String(block.type)) ? { thinking: { ...block } } : {}),
            });
            if (block.type === "text" && typeof block.text === "string" && block.text) {
              reply.content = (reply.content ?? "") + block.text;
              options.onTextDelta?.(block.text);
              // The client takes what it was sent before more is read (backpressure).
              if (options.drained) await options.drained();
            }
            break;
          }
          case "content_block_delta": {
            const delta = (event.delta ?? {}) as Block;
            const block = blocks.get(Number(event.index));
            if (delta.type === "text_delta" && typeof delta.text === "string" && delta.text) {
              reply.content = (reply.content ?? "") + delta.text;
              options.onTextDelta?.(delta.text);
              // The client takes what it was sent before more is read (backpressure).
              if (options.drained) await options.drained();
            } else if (delta.type === "input_json_delta" && block && typeof delta.partial_json === "string") {
              block.json += delta.partial_json;
            } else if (
              delta.type === "thinking_delta" &&
              block?.thinking &&
              typeof delta.thinking === "string"
            ) {
              block.thinking.thinking = String(block.thinking.thinking ?? "") + delta.thinking;
            } else if (
              delta.type === "signature_delta" &&
              block?.thinking &&
              typeof delta.signature === "string"
            ) {
              block.thinking.signature = String(block.thinking.signature ?? "") + delta.signature;
            }
            break;
          }
          case "message_delta": {
            const delta = (event.delta ?? {}) as Block;
            if (delta.stop_reason !== undefined && delta.stop_reason !== null) {
              reply.finishReason = fromWireFinish("messages", delta.stop_reason);
            }
            // The counts here are the totals so far; they replace message_start's.
            Object.assign(usage, event.usage);
            break;
          }
          case "error":
            throw new AgentError(
              "upstream_error",
              `The upstream model stream failed: ${upstreamMessage(JSON.stringify(event))}.`,
            );
          // ping, content_block_stop, message_stop and event types added later carry nothing to keep.
        }
      }
    } catch (error) {
      throw transport.streamFailure(error, options.signal);
    }
    const calls = [...blocks.entries()]
      .sort(([a], [b]) => a - b)
      .filter(([, block]) => block.type === "tool_use")
      .map(([, block]) => ({ id: block.id, name: block.name, arguments: block.json || "{}" }));
    reply.toolCalls = checkedCalls(calls, transport);
    const thinking = [...blocks.entries()]
      .sort(([a], [b]) => a - b)
      .flatMap(([, block]) => (block.thinking ? [block.thinking] : []));
    if (thinking.length) reply.reasoning = thinking;
    reply.usage = events ? (fromMessagesUsage(usage) as TurnUsage | null) : null;
    return reply;
  }
}
