import type { AgentError } from "./agent-error.js";
import { openAiErrorBody, type ResponseSink } from "./chat-completions-front.js";
import { messageItem, outputTextPart, type ResponsesOutputItem } from "./responses-items.js";

/**
 * The Responses API's event stream on a sink: `response.created` and `response.in_progress`, the
 * message item whose `output_text.delta`s go out as the model writes, then one item per handed-out
 * call (its arguments as one delta), and `response.completed` with the whole response
 * (`response.incomplete` for an answer cut off). Every event carries its `sequence_number`. The stream
 * starts with the first text (or at the end), with the headers known by then.
 */
export class ResponsesStreamWriter {
  #sequence = 0;
  #started = false;
  #textOpen = false;
  #text = "";
  /** Headers of the stream, known before its first byte (the thread's). */
  #headers: Record<string, string> = {};

  constructor(
    readonly sink: ResponseSink,
    /** The response as it stands before any output: its id, settings and `in_progress` status. */
    readonly inProgress: Record<string, unknown>,
    /** The id the message item gets (the same as in the final response). */
    readonly messageId: string,
  ) {}

  get started(): boolean {
    return this.#started;
  }

  #event(type: string, data: Record<string, unknown>): void {
    const payload = { type, ...data, sequence_number: this.#sequence++ };
    this.sink.write(`event: ${type}\ndata: ${JSON.stringify(payload)}\n\n`);
  }

  setHeaders(headers: Record<string, string>): void {
    Object.assign(this.#headers, headers);
  }

  #start(headers?: Record<string, string>): void {
    if (this.#started) return;
    this.#started = true;
    this.sink.startStream({ ...this.#headers, ...headers });
    this.#event("response.created", { response: this.inProgress });
    this.#event("response.in_progress", { response: this.inProgress });
  }

  text(delta: string): void {
    this.#start();
    if (!this.#textOpen) {
      this.#textOpen = true;
      this.#event("response.output_item.added", {
        output_index: 0,
        item: messageItem(this.messageId, "", "in_progress"),
      });
      this.#event("response.content_part.added", {
        item_id: this.messageId,
        output_index: 0,
        content_index: 0,
        part: outputTextPart(""),
      });
    }
    this.#text += delta;
    this.#event("response.output_text.delta", {
      item_id: this.messageId,
      output_index: 0,
      content_index: 0,
      delta,
      logprobs: [],
    });
  }

  /**
   * The items the stream has not shown yet, then `response.completed` with the final response, or
   * `response.incomplete` when it is cut off.
   */
  finish(response: Record<string, unknown>, headers?: Record<string, string>): void {
    this.#start(headers);
    const output = (response.output ?? []) as ResponsesOutputItem[];
    output.forEach((item, index) => {
      if (item.type === "message") {
        const text = String((item.content as Array<{ text?: unknown }>)[0]?.text ?? "");
        // Text the model gave without streaming it (a reply that came whole) still goes out as a delta.
        if (!this.#textOpen || this.#text !== text) this.text(text.slice(this.#text.length));
        this.#event("response.output_text.done", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          text,
          logprobs: [],
        });
        this.#event("response.content_part.done", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          part: outputTextPart(text),
        });
        this.#event("response.output_item.done", { output_index: index, item });
        return;
      }
      const custom = item.type === "custom_tool_call";
      const full = String((custom ? item.input : item.arguments) ?? "");
      this.#event("response.output_item.added", {
        output_index: index,
        item: { ...item, status: "in_progress", ...(custom ? { input: "" } : { arguments: "" }) },
      });
      const kind = custom ? "response.custom_tool_call_input" : "response.function_call_arguments";
      this.#event(`${kind}.delta`, { item_id: item.id, output_index: index, delta: full });
      this.#event(`${kind}.done`, {
        item_id: item.id,
        output_index: index,
        ...(custom ? { input: full } : { arguments: full, name: item.name }),
      });
      this.#event("response.output_item.done", { output_index: index, item });
    });
    this.#event(response.status === "incomplete" ? "response.incomplete" : "response.completed", {
      response,
    });
    this.sink.end();
  }

  /**
   * A failure after the stream started: the status went out already, so it is the last event. Its
   * `error` field is the error body the openai client raises from a stream.
   */
  fail(error: AgentError): void {
    const body = (openAiErrorBody(error) as { error: Record<string, unknown> }).error;
    this.#event("error", { code: body.code, message: body.message, param: null, error: body });
    this.sink.end();
  }
}
