import { randomBytes } from "node:crypto";
import type { AgentError } from "./agent-error.js";
import { messagesErrorBody, toMessagesUsage, toolUseInput } from "./anthropic-messages.js";
import type { ResponseSink } from "./chat-completions-front.js";
import type { TurnToolCall, TurnUsage } from "./turn.js";

export function messageId(): string {
  return `msg_${randomBytes(12).toString("base64url")}`;
}

/**
 * The Messages API's event stream on a sink: `message_start`, a text block whose deltas go out as the
 * model writes them, one `tool_use` block per handed-out call (its input as one `input_json_delta`),
 * then `message_delta` with the stop reason and the summed usage, and `message_stop`. The stream
 * starts with the first text (or at the end), so headers known only at the end can still go out.
 */
export class MessagesStreamWriter {
  readonly #id = messageId();
  #started = false;
  #textOpen = false;
  #index = 0;
  /** Headers of the stream, known before its first byte (the thread's). */
  #headers: Record<string, string> = {};

  constructor(
    readonly sink: ResponseSink,
    readonly model: string,
  ) {}

  get started(): boolean {
    return this.#started;
  }

  #event(type: string, data: Record<string, unknown>): void {
    this.sink.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  }

  setHeaders(headers: Record<string, string>): void {
    Object.assign(this.#headers, headers);
  }

  #start(headers?: Record<string, string>, model = this.model): void {
    if (this.#started) return;
    this.#started = true;
    this.sink.startStream({ ...this.#headers, ...headers });
    this.#event("message_start", {
      message: {
        id: this.#id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // Known only once the model calls are done: message_delta carries the sums.
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  text(text: string): void {
    this.#start();
    if (!this.#textOpen) {
      this.#textOpen = true;
      this.#event("content_block_start", { index: this.#index, content_block: { type: "text", text: "" } });
    }
    this.#event("content_block_delta", { index: this.#index, delta: { type: "text_delta", text } });
  }

  finish(
    answer: {
      content: string | null;
      toolCalls: readonly TurnToolCall[];
      stopReason: string;
      usage: TurnUsage;
      model: string;
    },
    headers?: Record<string, string>,
  ): void {
    this.#start(headers, answer.model);
    // Text the model gave without streaming it (a reply that came whole) still goes out first.
    if (!this.#textOpen && answer.content) this.text(answer.content);
    if (this.#textOpen) {
      this.#event("content_block_stop", { index: this.#index });
      this.#index++;
      this.#textOpen = false;
    }
    for (const call of answer.toolCalls) {
      const index = this.#index++;
      this.#event("content_block_start", {
        index,
        content_block: { type: "tool_use", id: call.id, name: call.name, input: {} },
      });
      this.#event("content_block_delta", {
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(toolUseInput(call.arguments)) },
      });
      this.#event("content_block_stop", { index });
    }
    const usage = toMessagesUsage(answer.usage);
    this.#event("message_delta", {
      delta: { stop_reason: answer.stopReason, stop_sequence: null },
      usage,
    });
    this.#event("message_stop", {});
    this.sink.end();
  }

  /** A failure after the stream started: the status went out already, so it is the last event. */
  fail(error: AgentError): void {
    this.#event("error", messagesErrorBody(error) as Record<string, unknown>);
    this.sink.end();
  }
}
