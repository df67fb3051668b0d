import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";

// OpenTelemetry spans for exec, wait, nested calls and snapshots, through `@opentelemetry/api` only: the
// host registers an SDK (the gateway does when OTLP is configured), or nothing is recorded. The API is
// not even loaded until a host has registered a tracer provider: the API keeps its global state under
// one well-known symbol per major version, so reading that slot tells whether anyone registered one
// without loading the API's modules (a cold start that does not trace pays for nothing of it).
const GLOBAL_API_KEY = Symbol.for("opentelemetry.js.api.1");
const TRACER_NAME = "@codecell/engine";

type Api = typeof OtelApi;
let api: Api | null = null;
let tracer: OtelApi.Tracer | null = null;

/** True once a host has registered a global tracer provider (any version-1 copy of the API). */
export function tracingRegistered(): boolean {
  const slot = (globalThis as Record<symbol, { trace?: unknown } | undefined>)[GLOBAL_API_KEY];
  return slot?.trace !== undefined;
}

function otelApi(): Api {
  api ??= createRequire(import.meta.url)("@opentelemetry/api") as Api;
  return api;
}

function engineTracer(): OtelApi.Tracer {
  tracer ??= otelApi().trace.getTracer(TRACER_NAME);
  return tracer;
}

export type SpanAttributes = Record<string, string | number | boolean | string[] | undefined>;

/**
 * One recording span and the context that makes it the parent of what runs under it. Made only when a
 * tracer provider is registered and the sampler kept the span: otherwise the helpers return null and
 * nothing else is made (no context, no attribute objects).
 */
export class TracedSpan {
  #context: OtelApi.Context | null = null;
  /** The context the span was started in (its parent's, with whatever else it carried, e.g. baggage). */
  readonly #parentContext: OtelApi.Context;

  constructor(
    readonly span: OtelApi.Span,
    parentContext: OtelApi.Context,
  ) {
    this.#parentContext = parentContext;
  }

  /** The context with this span active, for children and for code run under it (made once). */
  get context(): OtelApi.Context {
    this.#context ??= otelApi().trace.setSpan(this.#parentContext, this.span);
    return this.#context;
  }

  set(attributes: SpanAttributes): void {
    for (const key in attributes) {
      const value = attributes[key];
      if (value !== undefined) this.span.setAttribute(key, value);
    }
  }

  /** The W3C trace context (`traceparent`, `tracestate`) naming this span, for an outgoing request's headers. */
  traceHeaders(): Record<string, string> {
    const carrier: Record<string, string> = {};
    otelApi().propagation.inject(this.context, carrier);
    return carrier;
  }

  /** Runs `fn` with this span as the active one (so spans started inside it, e.g. by an MCP client, are its children). */
  run<T>(fn: () => T): T {
    return otelApi().context.with(this.context, fn);
  }

  /** Ends the span; with `errorType` its status is an error and `error.type` says which. */
  end(attributes?: SpanAttributes, errorType?: string, message?: string): void {
    if (attributes) this.set(attributes);
    if (errorType !== undefined) {
      this.span.setAttribute("error.type", errorType);
      this.span.setStatus({ code: otelApi().SpanStatusCode.ERROR, ...(message ? { message } : {}) });
    }
    this.span.end();
  }
}

export type StartSpanOptions = {
  /** The parent span; default the active context (the host's incoming request, when it set one). */
  parent?: TracedSpan | null;
  kind?: "internal" | "client" | "server";
  attributes?: SpanAttributes;
};

/**
 * Starts a span, or returns null when nothing would record it: no tracer provider registered, or the
 * sampler dropped it (then its children are not made either; with a parent-based sampler, which is the
 * default, they would be dropped too).
 */
export function startSpan(name: string, options: StartSpanOptions = {}): TracedSpan | null {
  if (!tracingRegistered()) return null;
  const otel = otelApi();
  const parentContext = options.parent ? options.parent.context : otel.context.active();
  const attributes: OtelApi.Attributes = {};
  for (const key in options.attributes) {
    const value = options.attributes[key];
    if (value !== undefined) attributes[key] = value;
  }
  const kind =
    options.kind === "client"
      ? otel.SpanKind.CLIENT
      : options.kind === "server"
        ? otel.SpanKind.SERVER
        : otel.SpanKind.INTERNAL;
  const span = engineTracer().startSpan(name, { kind, attributes }, parentContext);
  if (!span.isRecording()) {
    span.end();
    return null;
  }
  return new TracedSpan(span, parentContext);
}

/**
 * The W3C trace context of the active context (`traceparent`, and `tracestate` when there is one), for
 * an outgoing request that has no span of its own because the sampler dropped it: the request still
 * says which trace it belongs to and that it is not sampled, so the next service decides alike. Empty
 * when no host registered a tracer provider (nothing is loaded then).
 */
export function activeTraceHeaders(): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (!tracingRegistered()) return carrier;
  const otel = otelApi();
  otel.propagation.inject(otel.context.active(), carrier);
  return carrier;
}

/** JSON of a traced input or output, bounded: span attributes are not the place for a whole file. */
export function spanJson(value: unknown, maxChars = 4_096): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? "null";
  } catch {
    text = String(value);
  }
  return text.length > maxChars ? `${text.slice(0, maxChars)}…(${text.length} chars)` : text;
}

/** What a host asks the engine's spans to carry beyond names, ids, counts and outcomes. */
export type TracingOptions = {
  /**
   * Nested calls' inputs (after `redactInput`, as the trajectory records them) and the cell's code as
   * `gen_ai.tool.call.arguments`. Off by default: inputs may hold what an operator's backend must not.
   */
  recordInputs?: boolean;
  /** Nested calls' results and exec/wait values as `gen_ai.tool.call.result`. Off by default. */
  recordOutputs?: boolean;
};

/** An upstream model call (`gen_ai.operation.name = chat`), for hosts that call a model themselves. */
export type ModelCallSpan = {
  /** Ends it with what the answer said (or the failure). */
  end(result: {
    responseModel?: string;
    responseId?: string;
    inputTokens?: number;
    outputTokens?: number;
    finishReasons?: string[];
    /** A failure: its low-cardinality type (an HTTP status, an error class name). */
    errorType?: string;
    errorMessage?: string;
  }): void;
  /** Runs `fn` with this span active (an HTTP instrumentation would put its own span under it). */
  run<T>(fn: () => T): T;
  /**
   * The headers that carry this span's trace context (`traceparent`, and `tracestate` when there is
   * one): the call is an outgoing HTTP client request, so the model server's own spans join the trace.
   */
  traceHeaders(): Record<string, string>;
};

/**
 * A span for one upstream model call, named and attributed after the GenAI conventions
 * (`chat {model}`, kind client, `gen_ai.provider.name`, `gen_ai.request.model`, usage tokens). Null
 * when tracing is off, so a caller writes `span?.end(...)`.
 */
export function traceModelCall(request: {
  providerName: string;
  requestModel: string;
  serverAddress?: string;
  serverPort?: number;
  maxTokens?: number;
  temperature?: number;
  parent?: TracedSpan | null;
}): ModelCallSpan | null {
  const span = startSpan(`chat ${request.requestModel}`, {
    kind: "client",
    ...(request.parent !== undefined ? { parent: request.parent } : {}),
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": request.providerName,
      "gen_ai.request.model": request.requestModel,
      "server.address": request.serverAddress,
      "server.port": request.serverPort,
      "gen_ai.request.max_tokens": request.maxTokens,
      "gen_ai.request.temperature": request.temperature,
    },
  });
  if (!span) return null;
  return {
    run: (fn) => span.run(fn),
    traceHeaders: () => span.traceHeaders(),
    end(result) {
      span.end(
        {
          "gen_ai.response.model": result.responseModel,
          "gen_ai.response.id": result.responseId,
          "gen_ai.usage.input_tokens": result.inputTokens,
          "gen_ai.usage.output_tokens": result.outputTokens,
          "gen_ai.response.finish_reasons": result.finishReasons,
        },
        result.errorType,
        result.errorMessage,
      );
    },
  };
}
