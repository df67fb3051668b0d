// One upstream model call as an OpenTelemetry client span (`chat <model>`, the GenAI conventions), through
// the engine's tracing: nothing is loaded or recorded unless the host registered a tracer provider.

import { activeTraceHeaders, traceModelCall } from "@codecell/engine";
import { AgentError } from "./agent-error.js";
import type { ModelCallOptions, ModelReply, ModelRequest, ModelUpstream } from "./turn.js";
import type { UpstreamResponse } from "./upstream-transport.js";

/** `server.address` and `server.port` of an upstream's base URL, when it has one that parses. */
function serverOf(baseUrl: string | undefined): { serverAddress?: string; serverPort?: number } {
  if (!baseUrl) return {};
  try {
    const url = new URL(baseUrl);
    const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
    return { serverAddress: url.hostname, serverPort: port };
  } catch {
    return {}; // An upstream without a URL of its own (an embedding host's): the span names no server.
  }
}

/** The call's options with trace headers added (the same options when there are none). */
function withHeaders(options: ModelCallOptions, headers: Record<string, string>): ModelCallOptions {
  return Object.keys(headers).length === 0
    ? options
    : { ...options, headers: { ...options.headers, ...headers } };
}

/** Calls the upstream under a `chat` span that ends with the answer's model, usage and finish reason. */
export async function completeTraced(
  upstream: ModelUpstream,
  request: ModelRequest,
  options: ModelCallOptions,
): Promise<ModelReply> {
  const span = traceModelCall({
    providerName: upstream.providerName ?? "openai",
    requestModel: request.model,
    ...serverOf(upstream.baseUrl),
  });
  if (!span) return upstream.complete(request, withHeaders(options, activeTraceHeaders()));
  // The upstream request carries the span's context, so a traced model server (or a proxy in front of
  // it) puts its spans under this one.
  const traced = withHeaders(options, span.traceHeaders());
  try {
    const reply = await span.run(() => upstream.complete(request, traced));
    span.end({
      ...(reply.model ? { responseModel: reply.model } : {}),
      ...(reply.usage
        ? { inputTokens: reply.usage.promptTokens, outputTokens: reply.usage.completionTokens }
        : {}),
      finishReasons: [reply.finishReason],
    });
    return reply;
  } catch (error) {
    span.end({
      errorType: error instanceof AgentError ? error.kind : "_OTHER",
      errorMessage: error instanceof Error ? error.message : String(error),
    });
    throw error;
  }
}

/** An upstream that can send a client's body as it is (an upstream of the client's own API). */
export interface ForwardingUpstream {
  readonly providerName: string;
  readonly baseUrl: string;
  forward(
    body: unknown,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<UpstreamResponse>;
}

/** What a passed-through answer said, as far as its relay read it. */
export type RelayedAnswer = {
  responseModel?: string;
  inputTokens?: number;
  outputTokens?: number;
  finishReasons?: string[];
  /** A failure the upstream answered with: its HTTP status, as the HTTP client conventions name it. */
  errorType?: string;
};

/**
 * A passed-through request (the client's body sent upstream as is) under a `chat <model>` span, its
 * trace context in the request's headers like the loop's calls; `relay` writes the answer to the client
 * and says what it was.
 */
export async function forwardTraced(
  upstream: ForwardingUpstream,
  body: Record<string, unknown>,
  signal: AbortSignal,
  relay: (response: UpstreamResponse) => Promise<RelayedAnswer>,
  /** The client's own headers for the upstream, beside the trace context. */
  clientHeaders: Readonly<Record<string, string>> = {},
): Promise<void> {
  const span = traceModelCall({
    providerName: upstream.providerName,
    requestModel: typeof body.model === "string" ? body.model : "",
    ...serverOf(upstream.baseUrl),
  });
  if (!span) {
    const headers = { ...clientHeaders, ...activeTraceHeaders() };
    await relay(await upstream.forward(body, signal, Object.keys(headers).length ? headers : undefined));
    return;
  }
  try {
    const answer = await span.run(async () =>
      relay(await upstream.forward(body, signal, { ...clientHeaders, ...span.traceHeaders() })),
    );
    span.end(answer);
  } catch (error) {
    span.end({
      errorType: error instanceof AgentError ? error.kind : "_OTHER",
      errorMessage: error instanceof Error ? error.message : String(error),
    });
    throw error;
  }
}
