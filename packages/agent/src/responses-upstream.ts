import { assertCodeModePayload } from "@codecell/engine";
import { AgentError } from "./agent-error.js";
import { fromWireFinish } from "./finish-reasons.js";
import { contentText } from "./openai-messages.js";
import { readSseEvents } from "./sse.js";
import {
  imageDataUrl,
  type ModelCallOptions,
  type ModelReply,
  type ModelRequest,
  type ModelUpstream,
  type TurnMessage,
  type TurnUsage,
} from "./turn.js";
import { answerJson, callUpstream, checkedCalls, eventJson, streamFailed } from "./upstream-answer.js";
import {
  bearerTransport,
  type UpstreamConnection,
  type UpstreamResponse,
  type UpstreamTransport,
} from "./upstream-transport.js";

/** An OpenAI Responses API server: requests go to `<baseUrl>/responses`. */
export type ResponsesUpstreamOptions = UpstreamConnection & {
  /**
   * Offer `exec` as a custom tool whose input is the cell itself (no grammar), rather than a function
   * tool whose arguments are JSON: the model writes code without escaping it into a JSON string.
   * Default false. A custom exec takes the code only (no `language`).
   */
  execAsCustomTool?: boolean;
};

/** The tool a custom exec stands for, and the field of its arguments the cell is. */
const EXEC = "exec";
const CODE_FIELD = "code";

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

/** A user message's Chat Completions parts as Responses input parts. */
function inputParts(content: TurnMessage["content"]): string | unknown[] {
  if (typeof content === "string" || content === null) return content ?? "";
  return content.map((part) => {
    const fields = record(part);
    if (fields.type === "text") return { type: "input_text", text: String(fields.text ?? "") };
    const url = record(fields.image_url).url;
    if (fields.type === "image_url" && typeof url === "string") {
      const detail = record(fields.image_url).detail;
      return {
        type: "input_image",
        image_url: url,
        ...(typeof detail === "string" ? { detail } : { detail: "auto" }),
      };
    }
    throw invalid(
      `A ${JSON.stringify(fields.type)} content part cannot be sent to this gateway's upstream, which speaks the Responses API (agent.upstream.api): send text and images only.`,
    );
  });
}

/** A call's cell, for a custom exec: the `code` of its JSON arguments (the text itself if not JSON). */
function cellOf(args: string): string {
  try {
    const code = record(JSON.parse(args))[CODE_FIELD];
    return typeof code === "string" ? code : args;
  } catch {
    return args;
  }
}

/**
 * The loop's messages as Responses `input` items: calls and results as their own items (with a custom
 * exec, its calls as `custom_tool_call` items holding the cell, and their results as its outputs).
 */
export function toResponsesInput(messages: readonly TurnMessage[], execAsCustomTool = false): unknown[] {
  const input: unknown[] = [];
  const customCalls = new Set<string>();
  for (const message of messages) {
    switch (message.role) {
      case "system":
        input.push({ role: "system", content: contentText(message.content) });
        break;
      case "user":
        input.push({ role: "user", content: inputParts(message.content) });
        break;
      case "assistant":
        input.push(...(message.reasoning ?? []));
        if (message.content) input.push({ role: "assistant", content: message.content });
        for (const call of message.toolCalls ?? []) {
          if (execAsCustomTool && call.name === EXEC) {
            customCalls.add(call.id);
            input.push({
              type: "custom_tool_call",
              call_id: call.id,
              name: call.name,
              input: cellOf(call.arguments),
            });
          } else {
            input.push({
              type: "function_call",
              call_id: call.id,
              name: call.name,
              arguments: call.arguments,
            });
          }
        }
        break;
      default:
        input.push({
          type: customCalls.has(message.toolCallId) ? "custom_tool_call_output" : "function_call_output",
          call_id: message.toolCallId,
          output: toolOutput(message),
        });
    }
  }
  return input;
}

/**
 * A tool result as a (function or custom) call's output: its text, or, with a cell's images, an array
 * of the text and each image as an `input_image` data URL.
 */
function toolOutput(message: Extract<TurnMessage, { role: "tool" }>): string | unknown[] {
  // The failure convention of the other APIs: the Responses API marks no output as an error.
  const text = message.isError ? JSON.stringify({ error: message.content }) : message.content;
  if (!message.images?.length) return text;
  return [
    { type: "input_text", text },
    ...message.images.map((image) => ({
      type: "input_image",
      image_url: imageDataUrl(image),
      detail: "auto",
    })),
  ];
}

/**
 * Parameters in Chat Completions terms (what every front writes for an OpenAI upstream) as the
 * Responses API's; those it has no counterpart for are refused by name.
 */
function responsesParams(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const mapped: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    switch (key) {
      case "temperature":
      case "top_p":
      case "user":
      case "safety_identifier":
      case "service_tier":
      case "prompt_cache_key":
      case "metadata":
      case "parallel_tool_calls":
        mapped[key] = value;
        break;
      case "max_tokens":
      case "max_completion_tokens":
        mapped.max_output_tokens = value;
        break;
      case "reasoning_effort":
        mapped.reasoning = { effort: value };
        break;
      case "response_format": {
        const format = record(value);
        if (format.type === "json_schema")
          mapped.text = { format: { type: "json_schema", ...record(format.json_schema) } };
        else if (format.type === "json_object") mapped.text = { format: { type: "json_object" } };
        break;
      }
      case "tool_choice": {
        const name = record(record(value).function).name;
        mapped.tool_choice = typeof name === "string" ? { type: "function", name } : value;
        break;
      }
      case "store":
      case "n":
        break;
      default:
        throw invalid(
          `"${key}" has no counterpart in the Responses API, which this gateway's upstream speaks (agent.upstream.api): leave it out.`,
        );
    }
  }
  return mapped;
}

function fromResponsesUsage(usage: unknown): TurnUsage | null {
  const fields = record(usage);
  if (typeof fields.input_tokens !== "number" && typeof fields.output_tokens !== "number") return null;
  const input = typeof fields.input_tokens === "number" ? fields.input_tokens : 0;
  const output = typeof fields.output_tokens === "number" ? fields.output_tokens : 0;
  return {
    promptTokens: input,
    completionTokens: output,
    totalTokens: typeof fields.total_tokens === "number" ? fields.total_tokens : input + output,
  };
}

/**
 * An upstream that speaks OpenAI's Responses API (`<baseUrl>/responses`, bearer key). Each model call
 * sends the whole hidden conversation as `input` with `store: false`: the loop keeps the transcript,
 * so nothing depends on the upstream keeping responses.
 */
export class ResponsesUpstream implements ModelUpstream {
  readonly providerName = "openai";
  readonly baseUrl: string;
  readonly #transport: UpstreamTransport;
  readonly #execAsCustomTool: boolean;

  constructor(options: ResponsesUpstreamOptions) {
    this.#execAsCustomTool = options.execAsCustomTool ?? false;
    this.#transport = bearerTransport(options, {
      path: "/responses",
      answerKind: "a Responses API answer",
      baseUrlHint:
        'Check that agent.upstream.baseUrl is a Responses API root (it ends in /v1 for most) and agent.upstream.api is "responses".',
    });
    this.baseUrl = this.#transport.baseUrl;
  }

  /** The upstream's `GET /models` answer, or null when it has none. */
  models(signal: AbortSignal): Promise<unknown> {
    return this.#transport.getJson("/models", signal);
  }

  /** The body the loop sends for one model call; the final payload check runs on it (fail closed). */
  body(request: ModelRequest, stream: boolean): Record<string, unknown> {
    // Only where code mode drives: a passed-through request's tool named exec is the client's own.
    const customExec = this.#execAsCustomTool && request.codeModeDirectOnly !== null;
    const tools = request.tools.map((tool) =>
      customExec && tool.name === EXEC
        ? { type: "custom", name: tool.name, description: tool.description }
        : {
            type: "function",
            name: tool.name,
            description: tool.description,
            parameters: tool.parameters,
            strict: false,
          },
    );
    const body: Record<string, unknown> = {
      ...responsesParams(request.params),
      model: request.model,
      input: toResponsesInput(request.messages, customExec),
      // A reasoning model's chain comes back encrypted (nothing is stored upstream) and goes with the
      // hidden turns it belongs to; asked for only where the request sets a reasoning effort.
      ...(request.params.reasoning_effort !== undefined ? { include: ["reasoning.encrypted_content"] } : {}),
      ...(tools.length ? { tools } : {}),
      store: false,
      stream,
    };
    if (request.codeModeDirectOnly !== null) {
      assertCodeModePayload(
        tools.map((tool) => tool.name),
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
        whole: (text) => this.#reply(answerJson(text, this.#transport)),
        stream: (response) => this.#readStream(response, options),
      },
      options,
    );
  }

  /** A whole response object as the loop's reply: its message text, its function calls, its usage. */
  #reply(parsed: unknown): ModelReply {
    const response = record(parsed);
    if (!Array.isArray(response.output)) throw this.#transport.malformed("an answer without an output array");
    const text: string[] = [];
    const reasoning: unknown[] = [];
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    for (const item of response.output as unknown[]) {
      const fields = record(item);
      if (fields.type === "message") {
        for (const part of Array.isArray(fields.content) ? fields.content : []) {
          const partFields = record(part);
          if (partFields.type === "output_text" && typeof partFields.text === "string")
            text.push(partFields.text);
        }
      } else if (fields.type === "function_call") {
        calls.push({
          id: typeof fields.call_id === "string" ? fields.call_id : "",
          name: typeof fields.name === "string" ? fields.name : "",
          arguments: typeof fields.arguments === "string" ? fields.arguments : "{}",
        });
      } else if (fields.type === "custom_tool_call" && this.#execAsCustomTool && fields.name === EXEC) {
        // The cell as the loop's exec arguments: the same call a function exec would have made.
        calls.push({
          id: typeof fields.call_id === "string" ? fields.call_id : "",
          name: EXEC,
          arguments: JSON.stringify({ [CODE_FIELD]: typeof fields.input === "string" ? fields.input : "" }),
        });
      } else if (fields.type === "reasoning") {
        reasoning.push(item);
      } else {
        // A hosted tool's call would mean the model ran a tool besides exec and wait.
        throw this.#transport.malformed(`an output item of type ${JSON.stringify(fields.type)}`);
      }
    }
    const toolCalls = checkedCalls(calls, this.#transport);
    // An incomplete response says why in incomplete_details; the table reads that word.
    const ending = record(response.incomplete_details).reason ?? response.status;
    return {
      content: text.length ? text.join("") : null,
      toolCalls,
      finishReason: toolCalls.length ? "tool_calls" : fromWireFinish("responses", ending),
      usage: fromResponsesUsage(response.usage),
      model: typeof response.model === "string" ? response.model : "",
      ...(reasoning.length ? { reasoning } : {}),
    };
  }

  async #readStream(response: UpstreamResponse, options: ModelCallOptions): Promise<ModelReply> {
    const transport = this.#transport;
    let events = 0;
    let final: unknown = null;
    try {
      for await (const data of readSseEvents(
        response.body,
        options.signal,
        transport.limits.maxSseEventBytes,
      )) {
        events++;
        transport.traceSse(events, data);
        const event = eventJson(data, transport);
        switch (event.type) {
          case "response.output_text.delta":
            if (typeof event.delta === "string" && event.delta !== "") options.onTextDelta?.(event.delta);
            break;
          case "response.completed":
          case "response.incomplete":
            final = event.response;
            break;
          case "response.failed":
          case "error":
            throw streamFailed(event);
        }
      }
    } catch (error) {
      throw transport.streamFailure(error, options.signal);
    }
    if (final === null) throw transport.malformed("a stream that ended without response.completed");
    return this.#reply(final);
  }
}
