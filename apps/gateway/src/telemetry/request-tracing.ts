type Api = typeof import("@opentelemetry/api");

/** One incoming MCP request, as the server span describes it. */
export type IncomingRequest = {
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

/** Runs `handle` under a server span for the request; resolves to what `handle` resolved to. */
export type RequestTracer = <T>(request: IncomingRequest, handle: () => Promise<T>) => Promise<T>;

function stringCarrier(source: Record<string, unknown> | undefined): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (!source) return carrier;
  for (const key of ["traceparent", "tracestate", "baggage"]) {
    const value = source[key];
    if (typeof value === "string") carrier[key] = value;
    else if (Array.isArray(value) && typeof value[0] === "string") carrier[key] = value[0];
  }
  return carrier;
}

/**
 * The tracer for incoming requests, made once the SDK is registered. The trace context is taken from
 * the request's `params._meta.traceparent` (per message, so it wins) or else from the HTTP request's
 * `traceparent` header, so the gateway's spans join the client's trace; the span is named and
 * attributed after the MCP server conventions (`tools/call exec`, kind server).
 */
export function requestTracer(api: Api): RequestTracer {
  const tracer = api.trace.getTracer("@codecell/gateway");
  return async (request, handle) => {
    const fromMeta = stringCarrier(request.meta);
    const carrier = fromMeta.traceparent !== undefined ? fromMeta : stringCarrier(request.headers);
    const parent = api.propagation.extract(api.ROOT_CONTEXT, carrier);
    const attributes: Record<string, string> = {
      "mcp.method.name": request.method,
      "network.transport": request.transport === "stdio" ? "pipe" : "tcp",
    };
    if (request.target !== undefined && request.method === "tools/call") {
      attributes["gen_ai.tool.name"] = request.target;
      attributes["gen_ai.operation.name"] = "execute_tool";
    }
    if (request.requestId !== undefined) attributes["jsonrpc.request.id"] = String(request.requestId);
    if (request.sessionId) attributes["mcp.session.id"] = request.sessionId;
    const span = tracer.startSpan(
      request.target === undefined ? request.method : `${request.method} ${request.target}`,
      { kind: api.SpanKind.SERVER, attributes },
      parent,
    );
    try {
      const result = await api.context.with(api.trace.setSpan(parent, span), handle);
      if ((result as { isError?: unknown } | null)?.isError === true) {
        span.setAttribute("error.type", "tool_error");
        span.setStatus({ code: api.SpanStatusCode.ERROR });
      }
      return result;
    } catch (error) {
      span.setAttribute("error.type", "_OTHER");
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  };
}
