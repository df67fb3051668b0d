import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";

// Client spans for downstream MCP requests, and W3C trace context passed on to the servers, through
// `@opentelemetry/api` only (a host registers the SDK, or nothing happens). The API is loaded only
// once a host has registered something with it: its global state lives under one well-known symbol per
// major version, so reading that slot costs a property read and loads nothing.
const GLOBAL_API_KEY = Symbol.for("opentelemetry.js.api.1");
const TRACER_NAME = "@codecell/mcp-connector";

type Api = typeof OtelApi;
let api: Api | null = null;

function registered(): { trace?: unknown; propagation?: unknown } | undefined {
  return (globalThis as Record<symbol, { trace?: unknown; propagation?: unknown } | undefined>)[
    GLOBAL_API_KEY
  ];
}

function otelApi(): Api {
  api ??= createRequire(import.meta.url)("@opentelemetry/api") as Api;
  return api;
}

/** Who the request goes to, for the span's attributes. */
export type McpRequestTarget = {
  server: string;
  transport: "stdio" | "streamable-http" | "sse" | undefined;
  url?: string;
  sessionId?: string;
  protocolVersion?: string;
};

/**
 * Runs one downstream request under a client span named after the MCP conventions
 * (`{mcp.method.name} {target}`), with the span active so the HTTP transport's fetch injects its
 * `traceparent`. `meta` is what the request's `params._meta` should carry for the server to join the
 * trace (the conventions' proposal for MCP); empty when tracing is off.
 */
export async function traceMcpRequest<T>(
  method: string,
  name: string | undefined,
  target: McpRequestTarget,
  run: (meta: Record<string, string>) => Promise<T>,
): Promise<T> {
  const slot = registered();
  if (slot?.trace === undefined) return run(slot?.propagation === undefined ? {} : traceMeta());
  const otel = otelApi();
  const attributes: OtelApi.Attributes = {
    "mcp.method.name": method,
    "codecell.mcp.server": target.server,
    "network.transport": target.transport === "stdio" ? "pipe" : "tcp",
  };
  if (name !== undefined && method === "tools/call") {
    attributes["gen_ai.tool.name"] = name;
    attributes["gen_ai.operation.name"] = "execute_tool";
  }
  if (name !== undefined && method === "prompts/get") attributes["gen_ai.prompt.name"] = name;
  if (target.sessionId) attributes["mcp.session.id"] = target.sessionId;
  if (target.protocolVersion) attributes["mcp.protocol.version"] = target.protocolVersion;
  if (target.url) {
    try {
      const url = new URL(target.url);
      attributes["server.address"] = url.hostname;
      attributes["server.port"] = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    } catch {
      // A URL the connector could not parse fails its connect with its own error; the span goes without.
    }
  }
  const span = otel.trace
    .getTracer(TRACER_NAME)
    .startSpan(name === undefined ? method : `${method} ${name}`, {
      kind: otel.SpanKind.CLIENT,
      attributes,
    });
  const spanContext = otel.trace.setSpan(otel.context.active(), span);
  try {
    const result = await otel.context.with(spanContext, () => run(traceMeta(spanContext)));
    if (
      method === "tools/call" &&
      (result as { isError?: unknown } | null)?.isError === true &&
      span.isRecording()
    ) {
      // A tool's own failure is a result in MCP; the span says so without calling the request failed.
      span.setAttribute("error.type", "tool_error");
      span.setStatus({ code: otel.SpanStatusCode.ERROR });
    }
    return result;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    span.setAttribute("error.type", typeof code === "string" ? code : "_OTHER");
    span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}

/** `traceparent` (and `tracestate`) of a context, as the propagator the host registered writes them. */
function traceMeta(from?: OtelApi.Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  const otel = otelApi();
  otel.propagation.inject(from ?? otel.context.active(), carrier);
  return carrier;
}

/**
 * Adds the active trace context to an outgoing HTTP request's headers (W3C `traceparent`), so an HTTP
 * downstream server's own tracing joins the call's trace. Nothing is loaded or added when no host
 * registered a propagator.
 */
export function withTraceHeaders(init: RequestInit | undefined): RequestInit | undefined {
  if (registered()?.propagation === undefined) return init;
  const carrier = traceMeta();
  if (Object.keys(carrier).length === 0) return init;
  const headers = new Headers(init?.headers);
  for (const [key, value] of Object.entries(carrier)) headers.set(key, value);
  return { ...init, headers };
}
