import type { IncomingMessage, ServerResponse } from "node:http";
import { AgentError, type ModelUpstream, type ResponseSink } from "@codecell/agent";
import type { GatewayMetrics } from "./gateway-metrics.js";
import type { IncomingRequest, ServerSpan } from "./request-tracing.js";

/** Which API of the agent endpoint a request used, as the metrics' `api` label says it. */
export type AgentApi = "chat_completions" | "messages" | "responses";

/**
 * The server span of one agent-endpoint request. It is an HTTP server span, named after the HTTP
 * conventions (`POST /v1/chat/completions`: method and route, low-cardinality) with the GenAI
 * attributes on it, rather than a GenAI `invoke_agent` span: the GenAI conventions define
 * `invoke_agent` as the caller's view of an agent (kind client, or internal in process), while the
 * span a server opens for an incoming request is the HTTP server span, which dashboards group by
 * route. `gen_ai.operation.name` says what the client asked the endpoint for: to invoke its agent.
 * The trace context comes from the request's `traceparent` (and `tracestate`) header.
 */
export function agentRequest(req: IncomingMessage, route: string): IncomingRequest {
  const method = req.method ?? "POST";
  const host = req.socket.localAddress;
  return {
    name: `${method} ${route}`,
    attributes: {
      "http.request.method": method,
      "http.route": route,
      "url.path": route,
      "url.scheme": "http",
      "network.protocol.version": req.httpVersion,
      "server.address": host,
      "server.port": req.socket.localPort,
      "client.address": req.socket.remoteAddress,
      "user_agent.original": req.headers["user-agent"],
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "codecell",
    },
    carriers: [req.headers],
  };
}

/**
 * What one agent-endpoint request came to, gathered as it is handled (the front tells the sink its
 * thread and its failure) and told at its end to its server span and to the metrics.
 */
export class AgentRequestRecord {
  readonly #started = performance.now();
  #model: string | undefined;
  #conversation: string | undefined;
  #thread: string | undefined;
  #failure: AgentError | undefined;
  #streamed = false;

  constructor(
    readonly api: AgentApi,
    readonly res: ServerResponse,
  ) {}

  /** What the request asked for, once its body is read. */
  request(body: unknown, conversation: string | undefined): void {
    const model = (body as { model?: unknown } | null)?.model;
    if (typeof model === "string" && model !== "") this.#model = model;
    this.#conversation = conversation;
  }

  /** The sink the front writes to, telling this record what it learns on the way. */
  sink(inner: ResponseSink): ResponseSink {
    return {
      json: (status, body, headers) => inner.json(status, body, headers),
      startStream: (headers) => {
        this.#streamed = true;
        inner.startStream(headers);
      },
      write: (text) => inner.write(text),
      ...(inner.drained ? { drained: () => inner.drained?.() ?? Promise.resolve() } : {}),
      end: () => inner.end(),
      thread: (threadId) => {
        this.#thread = threadId;
      },
      failed: (error) => {
        this.#failure = error;
      },
    };
  }

  /** A failure answered before the front ran (a bad header, a body that is not JSON). */
  refused(error: unknown): void {
    if (AgentError.is(error)) this.#failure = error;
  }

  /**
   * The low-cardinality kind of failure: the front's error kind, else (a passed-through upstream
   * answer) the HTTP status as the HTTP conventions say; undefined for a success.
   */
  get errorType(): string | undefined {
    if (this.#failure) return this.#failure.kind;
    return this.status !== undefined && this.status >= 400 ? String(this.status) : undefined;
  }

  /** The HTTP status answered; undefined when nothing was (the client went away first). */
  get status(): number | undefined {
    return this.res.headersSent ? this.res.statusCode : undefined;
  }

  /** Tells the server span (when traced) and the metrics (when counted) what the request came to. */
  finish(span: ServerSpan | null, metrics: GatewayMetrics | null): void {
    const status = this.status;
    const errorType = this.errorType;
    if (span) {
      span.set({
        "http.response.status_code": status,
        "gen_ai.request.model": this.#model,
        "gen_ai.conversation.id": this.#thread,
        "codecell.thread.id": this.#thread,
        "codecell.conversation": this.#conversation,
      });
      if (errorType !== undefined) {
        // A server error, or a failure after a 200 stream began, is the span's error; a 4xx is the
        // client's (the HTTP conventions leave the server span's status unset then).
        const serverFault =
          (status ?? this.#failure?.status ?? 0) >= 500 || (this.#streamed && this.#failure !== undefined);
        span.fail(errorType, {
          ...(this.#failure ? { message: this.#failure.message } : {}),
          status: serverFault ? "error" : "unset",
        });
      }
    }
    metrics?.agentRequestEnded({
      api: this.api,
      statusCode: status ?? null,
      errorType: errorType ?? "",
      durationMs: performance.now() - this.#started,
    });
  }
}

/**
 * The upstream as the loop sees it, counting each model call (outcome, duration, tokens) in the
 * metrics when they are on. The loop's `chat <model>` span wraps this, so span and count are the same
 * calls.
 */
export function countedUpstream(
  upstream: ModelUpstream,
  metrics: () => GatewayMetrics | null,
): ModelUpstream {
  return {
    ...(upstream.providerName !== undefined ? { providerName: upstream.providerName } : {}),
    ...(upstream.baseUrl !== undefined ? { baseUrl: upstream.baseUrl } : {}),
    async complete(request, options) {
      const started = performance.now();
      try {
        const reply = await upstream.complete(request, options);
        metrics()?.modelCallEnded({
          outcome: "ok",
          durationMs: performance.now() - started,
          inputTokens: reply.usage?.promptTokens ?? 0,
          outputTokens: reply.usage?.completionTokens ?? 0,
        });
        return reply;
      } catch (error) {
        metrics()?.modelCallEnded({
          outcome: AgentError.is(error) ? error.kind : "_OTHER",
          durationMs: performance.now() - started,
          inputTokens: 0,
          outputTokens: 0,
        });
        throw error;
      }
    },
  };
}
