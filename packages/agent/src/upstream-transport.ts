import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { AgentError } from "./agent-error.js";
import { DEFAULT_LIMITS, type UpstreamLimits, upstreamLimitError } from "./limits.js";
import { SSE_PEEK_EVENTS, type UpstreamDebug } from "./upstream-debug.js";

/**
 * An upstream's answer as the loop reads it: the status, a header, the body's bytes as they arrive
 * (each at most once: as text, or as chunks).
 */
export interface UpstreamResponse {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  readonly body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
}

/**
 * Idle keep-alive connections are closed after this long, before the usual server keep-alive timeouts
 * (5 s for Node, 60 s and more elsewhere), so a request rarely meets a connection the server is closing.
 */
const IDLE_SOCKET_MS = 4_000;

class TimeoutError extends Error {
  override readonly name = "TimeoutError";
}

/**
 * The answer over `message`, its body bounded: past `maxBytes` the answer is cut off (the connection
 * closed) and reading it fails with the limit's error, so no answer makes the gateway hold more.
 */
function responseOf(message: IncomingMessage, maxBytes: number): UpstreamResponse {
  async function* bounded(): AsyncGenerator<Uint8Array> {
    let size = 0;
    for await (const chunk of message) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) {
        message.destroy();
        throw upstreamLimitError(`an answer of more than ${maxBytes} bytes`, "maxAnswerBytes", maxBytes);
      }
      yield chunk as Buffer;
    }
  }
  const body = bounded();
  return {
    status: message.statusCode ?? 0,
    headers: {
      get: (name) => {
        const value = message.headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
      },
    },
    body,
    async text() {
      const chunks: Uint8Array[] = [];
      for await (const chunk of body) chunks.push(chunk);
      return Buffer.concat(chunks).toString("utf8");
    },
  };
}

/** A URL as it may be shown: without a user name or password in it. */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.username && !parsed.password) return url;
    parsed.username = "";
    parsed.password = "";
    return parsed.toString().replace(/\/+$/, url.endsWith("/") ? "/" : "");
  } catch {
    return url.replace(/\/\/[^/@]*@/, "//");
  }
}

export type UpstreamTransportOptions = {
  /** The API root, such as `https://api.openai.com/v1`. */
  baseUrl: string;
  /** The path a model call goes to under the root: `/chat/completions`, `/messages`. */
  path: string;
  /** Sent with every request: the content type, the upstream's key header, the configured extras. */
  headers: Readonly<Record<string, string>>;
  /** How long one request may take, answer included. */
  timeoutMs: number;
  debug?: UpstreamDebug;
  /** What a well-formed answer is, for the message of a malformed one ("a Chat Completions answer"). */
  answerKind: string;
  /** What to check when an answer is not one: a sentence on `agent.upstream`. */
  baseUrlHint: string;
  /** Bounds on each answer (defaults: `DEFAULT_LIMITS`). */
  limits?: Partial<UpstreamLimits>;
  /**
   * Name the upstream's address in the errors clients get. Default false: a client learns that the
   * upstream failed and how, not where it is (operators see the address in the debug lines).
   */
  showAddress?: boolean;
};

/** How to reach an upstream model API, whatever format it speaks (the gateway's `agent.upstream`). */
export type UpstreamConnection = {
  /** The API root, such as `https://api.openai.com/v1`; model calls go to a path under it. */
  baseUrl: string;
  apiKey?: string;
  /** Sent with every upstream request (an organization header, a gateway's routing header). */
  headers?: Readonly<Record<string, string>>;
  /** How long one upstream request may take, answer included. Default 120000. */
  timeoutMs?: number;
  debug?: UpstreamDebug;
  /** Bounds on each answer (bytes, SSE event size, tool calls); `DEFAULT_LIMITS` for those not given. */
  limits?: Partial<UpstreamLimits>;
  /** Name the upstream's address in errors clients get. Default false. */
  showAddress?: boolean;
};

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 120_000;

/** The transport of an OpenAI API (Chat Completions, Responses): JSON bodies, the key as a bearer token. */
export function bearerTransport(
  connection: UpstreamConnection,
  api: Pick<UpstreamTransportOptions, "path" | "answerKind" | "baseUrlHint">,
): UpstreamTransport {
  return new UpstreamTransport({
    baseUrl: connection.baseUrl,
    path: api.path,
    headers: {
      "content-type": "application/json",
      ...(connection.apiKey ? { authorization: `Bearer ${connection.apiKey}` } : {}),
      ...connection.headers,
    },
    timeoutMs: connection.timeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
    ...(connection.debug ? { debug: connection.debug } : {}),
    ...(connection.limits ? { limits: connection.limits } : {}),
    ...(connection.showAddress ? { showAddress: true } : {}),
    answerKind: api.answerKind,
    baseUrlHint: api.baseUrlHint,
  });
}

/**
 * The HTTP side of one upstream model API, whatever format it speaks: one POST per model call with the
 * request timeout and the client's abort, failures as `AgentError`s that say what to do, and the debug
 * switches (the body sent, each request and answer, the SSE events read).
 */
export class UpstreamTransport {
  readonly baseUrl: string;
  readonly url: string;
  /** The upstream's bounds on each answer. */
  readonly limits: UpstreamLimits;
  /** How errors to clients name the upstream: "The upstream model" or "The upstream model at <url>". */
  readonly #shownName: string;
  /** The request URL as debug lines show it (without user info). */
  readonly #shownUrl: string;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #timeoutMs: number;
  readonly #debug: UpstreamDebug | undefined;
  readonly #answerKind: string;
  readonly #baseUrlHint: string;
  /** One pool of keep-alive connections per upstream: a model call does not pay a TCP (and TLS) handshake. */
  readonly #agent: HttpAgent;
  readonly #request: typeof httpRequest;
  #requests = 0;

  constructor(options: UpstreamTransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.url = `${this.baseUrl}${options.path}`;
    this.#headers = options.headers;
    this.#timeoutMs = options.timeoutMs;
    this.#debug = options.debug;
    this.#answerKind = options.answerKind;
    this.#baseUrlHint = options.baseUrlHint;
    this.limits = {
      maxAnswerBytes: options.limits?.maxAnswerBytes ?? DEFAULT_LIMITS.maxAnswerBytes,
      maxSseEventBytes: options.limits?.maxSseEventBytes ?? DEFAULT_LIMITS.maxSseEventBytes,
      maxToolCallsPerAnswer: options.limits?.maxToolCallsPerAnswer ?? DEFAULT_LIMITS.maxToolCallsPerAnswer,
    };
    this.#shownUrl = shownUrl(this.url);
    this.#shownName = options.showAddress
      ? `The upstream model at ${shownUrl(this.baseUrl)}`
      : "The upstream model";
    const https = this.url.startsWith("https:");
    const agentOptions = { keepAlive: true, timeout: IDLE_SOCKET_MS, scheduling: "lifo" as const };
    this.#agent = https ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
    this.#request = https ? httpsRequest : httpRequest;
  }

  /**
   * Sends one body and returns the answer once its status is in; an error status becomes an
   * `upstream_error` with the upstream's own message.
   */
  async post(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<UpstreamResponse> {
    const response = await this.forward(body, signal, headers);
    if (response.status >= 400) {
      // The status is the failure; a body that breaks off only loses its message.
      const text = await this.readText(response, signal).catch(() => "");
      const retryAfter = retryHeaders(response);
      throw new AgentError(
        "upstream_error",
        `${this.#shownName} answered ${response.status}: ${upstreamMessage(text)}. ${whatToDo(response.status, retryAfter["retry-after"])}`,
        { upstreamStatus: response.status, headers: retryAfter },
      );
    }
    return response;
  }

  /**
   * Sends one body as it is and returns the answer whatever its status (pass-through relays it
   * unchanged); only a failure to get an answer at all throws. `headers` go with this request only.
   */
  async forward(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<UpstreamResponse> {
    const number = ++this.#requests;
    this.#tracePayload(number, body);
    const started = Date.now();
    let payload: Buffer;
    try {
      payload = Buffer.from(JSON.stringify(body));
    } catch (error) {
      // A value nested past the stack's depth (a tool call's arguments, most likely).
      throw new AgentError(
        "invalid_request",
        `The conversation cannot be sent upstream: ${(error as Error).message}. A tool call's arguments or a tool's schema nest too deeply; send them flatter.`,
        { cause: error },
      );
    }
    let response: UpstreamResponse;
    try {
      response = await this.#send(payload, signal, headers);
    } catch (error) {
      this.#debug?.transport &&
        this.#debug.line("transport", `upstream #${number} POST ${this.#shownUrl} failed: ${String(error)}`);
      throw this.#sendFailure(error, signal);
    }
    if (this.#debug?.transport) {
      this.#debug.line(
        "transport",
        `upstream #${number} POST ${this.#shownUrl} -> ${response.status} ${response.headers.get("content-type") ?? ""} in ${Date.now() - started} ms`,
      );
    }
    return response;
  }

  /**
   * One POST on a pooled connection; resolves with the answer once its headers are in. The timeout
   * covers the whole answer, so a body still arriving at `timeoutMs` is cut off; the client's abort
   * ends it at any point. Nothing is sent twice: a model call is not idempotent (it costs tokens), and
   * a connection reset may come after the upstream read the request.
   */
  #send(
    payload: Buffer | null,
    signal: AbortSignal,
    headers: Readonly<Record<string, string>> | undefined,
    url = this.url,
  ): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason ?? new Error("aborted"));
        return;
      }
      const request = this.#request(url, {
        method: payload ? "POST" : "GET",
        agent: this.#agent,
        headers: {
          ...this.#headers,
          ...headers,
          ...(payload ? { "content-length": String(payload.length) } : {}),
        },
      });
      let answered = false;
      const timer = setTimeout(
        () => request.destroy(new TimeoutError(`no complete answer within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
      const onAbort = () =>
        request.destroy(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      signal.addEventListener("abort", onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      };
      request.on("error", (error) => {
        done();
        if (!answered) reject(error); // Once answered, the body's reader sees the failure.
      });
      request.on("response", (message) => {
        answered = true;
        message.on("end", done);
        message.on("close", done);
        resolve(responseOf(message, this.limits.maxAnswerBytes));
      });
      request.end(payload ?? undefined);
    });
  }

  /**
   * The JSON a GET under the API root answers (such as `/models`), or null when there is none: the
   * upstream has no such path, answers an error, or cannot be reached in time.
   */
  async getJson(path: string, signal: AbortSignal): Promise<unknown> {
    try {
      const response = await this.#send(null, signal, undefined, `${this.baseUrl}${path}`);
      const text = await response.text();
      return response.status < 300 ? (JSON.parse(text) as unknown) : null;
    } catch {
      return null;
    }
  }

  /** An answer's whole body as text; a body that breaks off is `upstream_unavailable`. */
  async readText(response: UpstreamResponse, signal: AbortSignal): Promise<string> {
    try {
      const text = await response.text();
      if (this.#debug?.transport) {
        this.#debug.line("transport", `upstream answer ${JSON.stringify(this.#debug.redact(text))}`);
      }
      return text;
    } catch (error) {
      if (AgentError.is(error)) throw error;
      if (signal.aborted) throw new AgentError("aborted", "The request was cancelled.", { cause: error });
      throw new AgentError(
        "upstream_unavailable",
        `${this.#shownName} broke off its answer (${String(error)}). Send the request again.`,
        { cause: error },
      );
    }
  }

  /** A failure while reading a stream, unless it is already one of the loop's own errors. */
  streamFailure(error: unknown, signal: AbortSignal): AgentError {
    if (AgentError.is(error)) return error;
    if (signal.aborted) return new AgentError("aborted", "The request was cancelled.", { cause: error });
    return new AgentError(
      "upstream_unavailable",
      `${this.#shownName} broke off its stream (${String(error)}). Send the request again.`,
      { cause: error },
    );
  }

  /** An answer that is not what the API gives: `what` says what came instead. */
  malformed(what: string): AgentError {
    return new AgentError(
      "upstream_malformed",
      `${this.#shownName} sent ${what}, not ${this.#answerKind}. ${this.#baseUrlHint}`,
    );
  }

  /** One SSE event read from an answer, for `CODECELL_DEBUG_SSE`. */
  traceSse(event: number, data: string): void {
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

  #sendFailure(error: unknown, signal: AbortSignal): AgentError {
    if (signal.aborted) return new AgentError("aborted", "The request was cancelled.", { cause: error });
    if (error instanceof TimeoutError) {
      return new AgentError(
        "upstream_unavailable",
        `${this.#shownName} did not answer within ${this.#timeoutMs} ms. Send the request again, or raise agent.upstream.timeoutMs.`,
        { cause: error },
      );
    }
    const code = (error as NodeJS.ErrnoException).code;
    return new AgentError(
      "upstream_unavailable",
      `${this.#shownName} could not be reached (${code ?? (error as Error).message ?? String(error)}). Check agent.upstream.baseUrl and that the server is up, then send the request again.`,
      { cause: error },
    );
  }

  #tracePayload(number: number, body: unknown): void {
    const debug = this.#debug;
    if (!debug?.payload) return;
    if (debug.payload === "tools") {
      // Chat Completions nests a tool's name in `function`; the Messages API does not.
      const tools = (body as { tools?: Array<{ name?: string; function?: { name?: string } }> }).tools ?? [];
      debug.line(
        "payload",
        `upstream #${number} tools: ${tools.map((tool) => tool.function?.name ?? tool.name).join(", ") || "(none)"}`,
      );
      return;
    }
    debug.line("payload", `upstream #${number} body ${JSON.stringify(debug.redact(body))}`);
  }
}

/** The headers that tell a client when to try again, as the upstream sent them (for its 429 or 503). */
export function retryHeaders(response: Pick<UpstreamResponse, "headers">): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of ["retry-after", "retry-after-ms"]) {
    const value = response.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  return headers;
}

/** What the client can do about an upstream's error status: each status names its own cause. */
function whatToDo(status: number, retryAfter: string | undefined): string {
  if (status === 429) {
    const when = retryAfter
      ? `${/^\d+$/.test(retryAfter) ? `in ${retryAfter} seconds` : `after ${retryAfter}`} (its Retry-After)`
      : "later";
    return `The upstream is rate limiting requests; send the request again ${when}.`;
  }
  if (status >= 500) return "It is the upstream's failure; send the request again later.";
  if (status === 401 || status === 403)
    return "Check agent.upstream.apiKey (and headers) in the gateway config.";
  if (status === 404) return "Check the model name and agent.upstream.baseUrl.";
  return "Check the request's parameters.";
}

/** The message of an upstream's error body (either API's shape, or a bare message), bounded. */
export function upstreamMessage(text: string): string {
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
