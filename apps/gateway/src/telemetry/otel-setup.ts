import type { Meter } from "@opentelemetry/api";
import type { TelemetrySettings } from "../config/telemetry-config.js";
import { setActiveTraceReader } from "../logger.js";
import { GATEWAY_VERSION } from "../version.js";
import { type RequestTracer, requestTracer } from "./request-tracing.js";

// The OpenTelemetry SDK and the OTLP exporters, set up only when the config or the OTEL_* variables
// name a collector; this module is imported only then (src/cli.ts). The SDK's packages are imported by
// name from the installed packages, not bundled into the CLI: a gateway without OTLP never reads one
// of their files (test/cold-start-modules.e2e.test.ts checks it).

type SdkTraceNode = typeof import("@opentelemetry/sdk-trace-node");
type SdkTraceBase = typeof import("@opentelemetry/sdk-trace-base");
type SdkMetrics = typeof import("@opentelemetry/sdk-metrics");
type Resources = typeof import("@opentelemetry/resources");
type Api = typeof import("@opentelemetry/api");

export type RunningTelemetry = {
  /** OTLP metrics' meter, or null when only traces are exported. */
  meter: Meter | null;
  /** Puts incoming MCP requests under server spans that join the client's trace. */
  traceRequest: RequestTracer | null;
  /** Flushes what is buffered and stops the exporters. */
  shutdown(): Promise<void>;
};

async function load<T>(name: string): Promise<T> {
  return (await import(name)) as T;
}

function positiveNumber(value: string | undefined): number | undefined {
  const number = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(number) && number >= 0 ? number : undefined;
}

export async function startTelemetry(
  settings: TelemetrySettings,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunningTelemetry> {
  const [api, resources] = await Promise.all([
    load<Api>("@opentelemetry/api"),
    load<Resources>("@opentelemetry/resources"),
  ]);
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME through the SDK's own detector; the config's
  // attributes and name win over them.
  const resource = resources.detectResources({ detectors: [resources.envDetector] }).merge(
    resources.resourceFromAttributes({
      ...settings.resourceAttributes,
      "service.name": settings.serviceName,
      "service.version": GATEWAY_VERSION,
    }),
  );
  const stops: Array<() => Promise<void>> = [];
  let traceRequest: RequestTracer | null = null;

  if (settings.tracesUrl !== null) {
    const [node, base] = await Promise.all([
      load<SdkTraceNode>("@opentelemetry/sdk-trace-node"),
      load<SdkTraceBase>("@opentelemetry/sdk-trace-base"),
    ]);
    const { OTLPTraceExporter } =
      settings.tracesProtocol === "http/json"
        ? await load<typeof import("@opentelemetry/exporter-trace-otlp-http")>(
            "@opentelemetry/exporter-trace-otlp-http",
          )
        : await load<typeof import("@opentelemetry/exporter-trace-otlp-proto")>(
            "@opentelemetry/exporter-trace-otlp-proto",
          );
    const exporter = new OTLPTraceExporter({ url: settings.tracesUrl, headers: settings.headers });
    const root =
      settings.sampler.kind === "always_on"
        ? new base.AlwaysOnSampler()
        : settings.sampler.kind === "always_off"
          ? new base.AlwaysOffSampler()
          : new base.TraceIdRatioBasedSampler(settings.sampler.ratio);
    // A remote parent is a client's traceparent: its sampled flag decides only when the config trusts it.
    const remote = settings.honorClientSampling
      ? {}
      : { remoteParentSampled: root, remoteParentNotSampled: root };
    const sampler = settings.sampler.parentBased ? new base.ParentBasedSampler({ root, ...remote }) : root;
    const scheduledDelayMillis = positiveNumber(env.OTEL_BSP_SCHEDULE_DELAY);
    const maxExportBatchSize = positiveNumber(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE);
    const maxQueueSize = positiveNumber(env.OTEL_BSP_MAX_QUEUE_SIZE);
    const provider = new node.NodeTracerProvider({
      resource,
      sampler,
      spanProcessors: [
        new base.BatchSpanProcessor(exporter, {
          ...(scheduledDelayMillis !== undefined ? { scheduledDelayMillis } : {}),
          ...(maxExportBatchSize !== undefined ? { maxExportBatchSize } : {}),
          ...(maxQueueSize !== undefined ? { maxQueueSize } : {}),
        }),
      ],
    });
    // The global provider, the W3C trace-context propagator and the async context manager: the engine's
    // and the MCP connector's spans (through @opentelemetry/api) go to this provider from now on.
    provider.register();
    traceRequest = requestTracer(api);
    setActiveTraceReader(() => api.trace.getActiveSpan()?.spanContext().traceId);
    stops.push(() => provider.shutdown());
  }

  let meter: Meter | null = null;
  if (settings.metricsUrl !== null) {
    const sdk = await load<SdkMetrics>("@opentelemetry/sdk-metrics");
    const { OTLPMetricExporter } =
      settings.metricsProtocol === "http/json"
        ? await load<typeof import("@opentelemetry/exporter-metrics-otlp-http")>(
            "@opentelemetry/exporter-metrics-otlp-http",
          )
        : await load<typeof import("@opentelemetry/exporter-metrics-otlp-proto")>(
            "@opentelemetry/exporter-metrics-otlp-proto",
          );
    const provider = new sdk.MeterProvider({
      resource,
      readers: [
        new sdk.PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter({ url: settings.metricsUrl, headers: settings.headers }),
          exportIntervalMillis: settings.metricsIntervalMs,
          exportTimeoutMillis: Math.min(30_000, settings.metricsIntervalMs),
        }),
      ],
    });
    meter = provider.getMeter("@codecell/gateway", GATEWAY_VERSION);
    stops.push(() => provider.shutdown());
  }

  return {
    meter,
    traceRequest,
    async shutdown() {
      // Export on the way out is best effort: an exporter that cannot flush (its collector away) must
      // not hold up or fail the gateway's stop, and the process is ending.
      await Promise.all(stops.map((stop) => stop().catch(() => {})));
    },
  };
}
