import { assertCodeModePayload } from "@codecell/engine";
import { AgentError } from "./agent-error.js";
import { fromOpenAiUsage, toOpenAiMessages } from "./openai-messages.js";
import { readSseEvents } from "./sse.js";
import type { ModelCallOptions, ModelReply, ModelRequest, ModelUpstream, TurnToolCall } from "./turn.js";
import { SSE_PEEK_EVENTS, type UpstreamDebug } from "./upstream-debug.js";

export type OpenAiUpstreamOptions = {
  /** The API root, such as `https://api.openai.com/v1`; requests go to `<baseUrl>/chat/completions`. */
  baseUrl: string;
  apiKey?: string;
  /** Sent with every upstream request (an organization header, a gateway's routing header). */
  headers?: Readonly<Record<string, string>>;
  /** How long one upstream request may take, answer included. Default 120000. */
  timeoutMs?: number;
  debug?: UpstreamDebug;
};

const DEFAULT_TIMEOUT_MS = 120_000;

/** An OpenAI-compatible Chat Completions server as the loop's upstream, over Node's fetch. */
export class OpenAiUpstream implements ModelUpstream {
  readonly baseUrl: string;
  readonly #url: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #debug: UpstreamDebug | undefined;
  #requests = 0;

  constructor(options: OpenAiUpstreamOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#url = `${this.baseUrl}/chat/completions`;
    this.#headers = {
      "content-type": "application/json",
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
      ...options.headers,
    };
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#debug = options.debug;
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

  async complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelReply> {
    const stream = options.onTextDelta !== undefined;
    let body: Record<string, unknown>;
    try {
      body = this.body(request, stream);
    } catch (error) {
      throw new AgentError("internal", (error as Error).message, { cause: error });
    }
    const response = await this.post(body, options.signal, options.headers);
    if (!stream || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
      const text = await this.#readText(response, options.signal);
      return parseCompletion(text, this.baseUrl);
    }
    return this.#readStream(response, options);
  }

  /**
   * Sends one body upstream and returns the answer once its status is in; an error status becomes an
   * `upstream_error` with the upstream's own message. Pass-through uses it with the client's body as is.
   */
  async post(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<Response> {
    const response = await this.forward(body, signal, headers);
    if (response.status >= 400) {
      const text = await this.#readText(response, signal).catch(() => "");
      throw new AgentError(
        "upstream_error",
        `The upstream model at ${this.baseUrl} answered ${response.status}: ${upstreamMessage(text)}. ${
          response.status >= 500
            ? "It is the upstream's failure; send the request again later."
            : "Check the request (model name, parameters) and agent.upstream (apiKey)."
        }`,
        { upstreamStatus: response.status },
      );
    }
    return response;
  }

  /**
   * Sends one body upstream as it is and returns the answer whatever its status (pass-through returns
   * it unchanged); only a failure to get an answer at all throws. `headers` go with this request only.
   */
  async forward(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<Response> {
    const number = ++this.#requests;
    this.#tracePayload(number, body);
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const linked = AbortSignal.any([signal, timeout]);
    const started = Date.now();
    let response: Response;
    try {
      response = await fetch(this.#url, {
        method: "POST",
        headers: headers ? { ...this.#headers, ...headers } : this.#headers,
        body: JSON.stringify(body),
        signal: linked,
      });
    } catch (error) {
      this.#debug?.transport &&
        this.#debug.line("transport", `upstream #${number} POST ${this.#url} failed: ${String(error)}`);
      throw this.#fetchFailure(error, signal, timeout);
    }
    if (this.#debug?.transport) {
      this.#debug.line(
        "transport",
        `upstream #${number} POST ${this.#url} -> ${response.status} ${response.headers.get("content-type") ?? ""} in ${Date.now() - started} ms`,
      );
    }
    return response;
  }

  #fetchFailure(error: unknown, signal: AbortSignal, timeout: AbortSignal): AgentError {
    if (signal.aborted) return new AgentError("aborted", "The request was cancelled.", { cause: error });
    if (timeout.aborted) {
      return new AgentError(
        "upstream_unavailable",
        `The upstream model at ${this.baseUrl} did not answer within ${this.#timeoutMs} ms. Send the request again, or raise agent.upstream.timeoutMs.`,
        { cause: error },
      );
    }
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return new AgentError(
      "upstream_unavailable",
      `The upstream model at ${this.baseUrl} could not be reached (${cause?.code ?? cause?.message ?? String(error)}). Check agent.upstream.baseUrl and that the server is up, then send the request again.`,
      { cause: error },
    );
  }

  async #readText(response: Response, signal: AbortSignal): Promise<string> {
    try {
      const text = await response.text();
      if (this.#debug?.transport) {
        this.#debug.line("transport", `upstream answer ${JSON.stringify(this.#debug.redact(text))}`);
      }
      return text;
    } catch (error) {
      if (signal.aborted) throw new AgentError("aborted", "The request was cancelled.", { cause: error });
      throw new AgentError(
        "upstream_unavailable",
        `The upstream model at ${this.baseUrl} broke off its answer (${String(error)}). Send the request again.`,
        { cause: error },
      );
    }
  }

  async #readStream(response: Response, options: ModelCallOptions): Promise<ModelReply> {
    const reply: ModelReply = { content: null, toolCalls: [], finishReason: "stop", usage: null, model: "" };
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    let events = 0;
    try {
      for await (const data of readSseEvents(response.body, options.signal)) {
        events++;
        this.#traceSse(events, data);
        if (data === "[DONE]") break;
        let chunk: Record<string, unknown>;
        try {
          chunk = JSON.parse(data) as Record<string, unknown>;
        } catch {
          throw malformed(this.baseUrl, `an SSE event that is not JSON (${data.slice(0, 80)})`);
        }
        if (typeof chunk.model === "string") reply.model = chunk.model;
        if (chunk.usage) reply.usage = fromOpenAiUsage(chunk.usage);
        if (chunk.error)
          throw new AgentError(
            "upstream_error",
            `The upstream model stream failed: ${upstreamMessage(JSON.stringify(chunk))}.`,
          );
        const choice = (Array.isArray(chunk.choices) ? chunk.choices[0] : undefined) as
          | { delta?: Record<string, unknown>; finish_reason?: unknown }
          | undefined;
        if (!choice) continue;
        const delta = choice.delta ?? {};
        if (typeof delta.content === "string" && delta.content !== "") {
          reply.content = (reply.content ?? "") + delta.content;
          options.onTextDelta?.(delta.content);
        }
        if (Array.isArray(delta.tool_calls)) {
          for (const part of delta.tool_calls as Array<Record<string, unknown>>) {
            const index = typeof part.index === "number" ? part.index : calls.length;
            if (!calls[index]) calls[index] = { id: "", name: "", arguments: "" };
            const call = calls[index]!;
            const fn = (part.function ?? {}) as { name?: unknown; arguments?: unknown };
            if (typeof part.id === "string") call.id = part.id;
            if (typeof fn.name === "string") call.name += fn.name;
            if (typeof fn.arguments === "string") call.arguments += fn.arguments;
          }
        }
        if (typeof choice.finish_reason === "string") reply.finishReason = choice.finish_reason;
      }
    } catch (error) {
      if (AgentError.is(error)) throw error;
      if (options.signal.aborted)
        throw new AgentError("aborted", "The request was cancelled.", { cause: error });
      throw new AgentError(
        "upstream_unavailable",
        `The upstream model at ${this.baseUrl} broke off its stream (${String(error)}). Send the request again.`,
        { cause: error },
      );
    }
    reply.toolCalls = checkedCalls(calls.filter(Boolean), this.baseUrl);
    return reply;
  }

  #tracePayload(number: number, body: unknown): void {
    const debug = this.#debug;
    if (!debug?.payload) return;
    if (debug.payload === "tools") {
      const tools = (body as { tools?: Array<{ function?: { name?: string } }> }).tools ?? [];
      debug.line(
        "payload",
        `upstream #${number} tools: ${tools.map((tool) => tool.function?.name).join(", ") || "(none)"}`,
      );
      return;
    }
    debug.line("payload", `upstream #${number} body ${JSON.stringify(debug.redact(body))}`);
  }

  #traceSse(event: number, data: string): void {
    const debug = this.#debug;
    if (!debug?.sse) return;
    if (debug.sse === "events") debug.line("sse", `upstream event ${event}: ${data.length} bytes`);
    else if (event <= SSE_PEEK_EVENTS) {
      let shown: unknown = data;
      try {
        shown = JSON.parse(data);
      } catch {
        // Not JSON: the debug line shows the event's text as it came.
      }
      debug.line("sse", `upstream event ${event}: ${JSON.stringify(debug.redact(shown))}`);
    }
  }
}

function malformed(baseUrl: string, what: string): AgentError {
  return new AgentError(
    "upstream_malformed",
    `The upstream model at ${baseUrl} sent ${what}, not a Chat Completions answer. Check that agent.upstream.baseUrl is an OpenAI-compatible API root (it ends in /v1 for most).`,
  );
}

function upstreamMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message =
      typeof parsed.error === "string"
        ? parsed.error
        : typeof parsed.error?.message === "string"
          ? parsed.error.message
          : typeof parsed.message === "string"
            ? parsed.message
            : null;
    if (message) return message.slice(0, 500);
  } catch {
    // Not JSON: the body's own text (below) is the message.
  }
  return text.trim() ? text.trim().slice(0, 300) : "(no body)";
}

function checkedCalls(
  calls: Array<{ id: string; name: string; arguments: string }>,
  baseUrl: string,
): TurnToolCall[] {
  for (const call of calls) {
    if (!call.id || !call.name) throw malformed(baseUrl, "a tool call without an id or a name");
  }
  return calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments || "{}" }));
}

/** A non-streamed Chat Completions answer as the loop's reply; anything else is `upstream_malformed`. */
export function parseCompletion(text: string, baseUrl: string): ModelReply {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw malformed(baseUrl, `an answer that is not JSON (${text.slice(0, 80) || "empty"})`);
  }
  const choice = (Array.isArray(parsed?.choices) ? parsed.choices[0] : undefined) as
    | { message?: Record<string, unknown>; finish_reason?: unknown }
    | undefined;
  const message = choice?.message;
  if (typeof message !== "object" || message === null)
    throw malformed(baseUrl, "an answer without choices[0].message");
  const wireCalls = Array.isArray(message.tool_calls)
    ? (message.tool_calls as Array<Record<string, unknown>>)
    : [];
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
    toolCalls: checkedCalls(calls, baseUrl),
    finishReason: typeof choice?.finish_reason === "string" ? choice.finish_reason : "stop",
    usage: fromOpenAiUsage(parsed.usage),
    model: typeof parsed.model === "string" ? parsed.model : "",
  };
}
