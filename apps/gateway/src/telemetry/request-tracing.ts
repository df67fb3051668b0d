type Api = typeof import("@opentelemetry/api");

/** Attribute values a server span takes. */
export type ServerSpanAttributes = Record<string, string | number | boolean | undefined>;

/**
 * One incoming request as its server span describes it, whatever carried it (an MCP message, an
 * agent-endpoint HTTP request): the span's name and attributes, and where the client's trace context
 * may be, the first carrier with a `traceparent` winning.
 */
export type IncomingRequest = {
  name: string;
  attributes: ServerSpanAttributes;
  carriers: ReadonlyArray<Record<string, unknown> | undefined>;
};

/** The open server span, for what is known only once the request has been handled. */
export type ServerSpan = {
  set(attributes: ServerSpanAttributes): void;
  /**
   * Records a failure: `error.type` (a low-cardinality kind). `status: "error"` marks the span's status
   * as an error too; the HTTP conventions leave it unset when the client's request was at fault (4xx).
   */
  fail(errorType: string, options?: { message?: string; status?: "error" | "unset" }): void;
};

/**
 * Runs `handle` under a server span for the request; resolves to what `handle` resolved to. A throw
 * ends the span as failed (`error.type` `_OTHER` unless `handle` had already said which failure).
 */
export type RequestTracer = <T>(
  request: IncomingRequest,
  handle: (span: ServerSpan) => Promise<T>,
) => Promise<T>;

/**
 * The trace context a client sent: `traceparent` and `tracestate` only. Its `baggage` is not taken:
 * what the context holds goes on with every outgoing request (the upstream model, downstream servers),
 * and a client's baggage is not this gateway's to pass on.
 */
function stringCarrier(source: Record<string, unknown> | undefined): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (!source) return carrier;
  for (const key of ["traceparent", "tracestate"]) {
    const value = source[key];
    if (typeof value === "string") carrier[key] = value;
    else if (Array.isArray(value) && typeof value[0] === "string") carrier[key] = value[0];
  }
  return carrier;
}

/** One incoming MCP request, as the MCP server conventions describe it. */
export type IncomingMcpRequest = {
  method: string;
  /** The tool (or prompt) the request names, for the span's name and `gen_ai.tool.name`. */
  target?: string;
  requestId?: string | number;
  sessionId?: string;
  transport: "stdio" | "http";
  /** `params._meta` of the request: where the MCP conventions carry `traceparent`. */
  meta?: Record<string, unknown>;
  /** The HTTP request's headers (Streamable HTTP), with its own `traceparent`. */
  headers?: Record<string, string | string[] | undefined>;
};

/**
 * An MCP request's server span (`tools/call exec`, after the MCP server conventions). Its trace context
 * comes from `params._meta.traceparent` (per message, so it wins) or else from the HTTP request's
 * `traceparent` header.
 */
export function mcpRequest(request: IncomingMcpRequest): IncomingRequest {
  const attributes: ServerSpanAttributes = {
    "mcp.method.name": request.method,
    "network.transport": request.transport === "stdio" ? "pipe" : "tcp",
  };
  if (request.target !== undefined && request.method === "tools/call") {
    attributes["gen_ai.tool.name"] = request.target;
    attributes["gen_ai.operation.name"] = "execute_tool";
  }
  if (request.requestId !== undefined) attributes["jsonrpc.request.id"] = String(request.requestId);
  if (request.sessionId) attributes["mcp.session.id"] = request.sessionId;
  return {
    name: request.target === undefined ? request.method : `${request.method} ${request.target}`,
    attributes,
    carriers: [request.meta, request.headers],
  };
}

/**
 * The tracer for incoming requests, made once the SDK is registered: the span joins the client's trace
 * (W3C trace context from the request's carriers) and is the active span while `handle` runs, so the
 * engine's exec and nested-call spans and the agent's model-call spans are its children.
 */
export function requestTracer(api: Api): RequestTracer {
  const tracer = api.trace.getTracer("@codecell/gateway");
  return async (request, handle) => {
    const carrier =
      request.carriers.map(stringCarrier).find((candidate) => candidate.traceparent !== undefined) ?? {};
    const parent = api.propagation.extract(api.ROOT_CONTEXT, carrier);
    const attributes: Record<string, string | number | boolean> = {};
    for (const [key, value] of Object.entries(request.attributes)) {
      if (value !== undefined) attributes[key] = value;
    }
    const span = tracer.startSpan(request.name, { kind: api.SpanKind.SERVER, attributes }, parent);
    let failed = false;
    const open: ServerSpan = {
      set(more) {
        for (const [key, value] of Object.entries(more)) {
          if (value !== undefined) span.setAttribute(key, value);
        }
      },
      fail(errorType, options = {}) {
        failed = true;
        span.setAttribute("error.type", errorType);
        if (options.status !== "unset") {
          span.setStatus({
            code: api.SpanStatusCode.ERROR,
            ...(options.message ? { message: options.message } : {}),
          });
        }
      },
    };
    try {
      return await api.context.with(api.trace.setSpan(parent, span), () => handle(open));
    } catch (error) {
      if (!failed) open.fail("_OTHER", { message: (error as Error)?.message ?? String(error) });
      throw error;
    } finally {
      span.end();
    }
  };
}
