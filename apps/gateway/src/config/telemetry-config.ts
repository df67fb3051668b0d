import { z } from "zod";
import type { ConfigProblem } from "./config-problem.js";

/**
 * The `telemetry` block and the standard OpenTelemetry environment variables, resolved into what the
 * gateway exports over OTLP. Off unless an endpoint is known: the block's `endpoint` (or its traces /
 * metrics endpoints), or `OTEL_EXPORTER_OTLP_ENDPOINT` / `_TRACES_ENDPOINT` / `_METRICS_ENDPOINT`.
 * The block wins over the environment field by field; `OTEL_SDK_DISABLED=true` or `enabled: false`
 * turns everything off.
 */
export type OtlpProtocol = "http/protobuf" | "http/json";

export type TelemetrySettings = {
  serviceName: string;
  /** Resource attributes from the block (OTEL_RESOURCE_ATTRIBUTES is added by the SDK's env detector). */
  resourceAttributes: Record<string, string>;
  /** Headers for every OTLP request (OTEL_EXPORTER_OTLP_HEADERS is read too). */
  headers: Record<string, string>;
  /** Full URL spans are POSTed to, or null when traces are off. */
  tracesUrl: string | null;
  tracesProtocol: OtlpProtocol;
  /** Full URL metrics are POSTed to, or null when OTLP metrics are off. */
  metricsUrl: string | null;
  metricsProtocol: OtlpProtocol;
  metricsIntervalMs: number;
  sampler: { kind: "always_on" | "always_off" | "ratio"; ratio: number; parentBased: boolean };
  /**
   * A client's `traceparent` sampled flag decides for its request's trace (parent-based sampling).
   * False: the gateway's own sampler decides for requests of clients too (they still join the trace).
   */
  honorClientSampling: boolean;
  /** Nested inputs (redacted as in the trajectory) and the cell's code on spans. */
  recordInputs: boolean;
  /** Nested results and exec values on spans. */
  recordOutputs: boolean;
};

const protocolSchema = z.enum(["http/protobuf", "http/json"]);

export const telemetrySchema = () =>
  z.strictObject({
    enabled: z.boolean().optional(),
    endpoint: z.url({ protocol: /^https?$/ }).optional(),
    tracesEndpoint: z.url({ protocol: /^https?$/ }).optional(),
    metricsEndpoint: z.url({ protocol: /^https?$/ }).optional(),
    protocol: protocolSchema.optional(),
    headers: z.record(z.string(), z.string()).optional(),
    serviceName: z.string().min(1).max(200).optional(),
    resourceAttributes: z.record(z.string(), z.string()).optional(),
    sampleRatio: z.number().min(0).max(1).optional(),
    honorClientSampling: z.boolean().optional(),
    metricsIntervalSeconds: z.number().min(1).max(3600).optional(),
    recordInputs: z.boolean().optional(),
    recordOutputs: z.boolean().optional(),
  });

export type TelemetryBlock = z.infer<ReturnType<typeof telemetrySchema>>;

export const TELEMETRY_FIELD_HINTS: Record<string, string> = {
  telemetry:
    'an object such as { "endpoint": "http://127.0.0.1:4318", "protocol": "http/protobuf" } (OTLP over HTTP)',
  "telemetry.endpoint":
    'the OTLP/HTTP base URL, e.g. "http://127.0.0.1:4318" (/v1/traces and /v1/metrics are added)',
  "telemetry.tracesEndpoint": 'the full URL spans go to, e.g. "http://127.0.0.1:4318/v1/traces"',
  "telemetry.metricsEndpoint": 'the full URL metrics go to, e.g. "http://127.0.0.1:4318/v1/metrics"',
  "telemetry.protocol": '"http/protobuf" (default) or "http/json"',
  "telemetry.sampleRatio": "a number from 0 to 1: the share of traces kept (parent-based)",
  "telemetry.honorClientSampling":
    "true (default) to let a client's traceparent sampled flag decide for its request; false to apply the gateway's own sampler (sampleRatio) to every request",
  "telemetry.metricsIntervalSeconds": "seconds between OTLP metric exports (1 to 3600, default 60)",
};

const DEFAULT_METRICS_INTERVAL_MS = 60_000;

function protocolOf(value: string | undefined, variable: string, file: string, problems: ConfigProblem[]) {
  if (value === undefined || value === "") return undefined;
  if (value === "http/protobuf" || value === "http/json") return value;
  problems.push({
    file,
    path: "",
    message: `${variable}=${value} is not supported: codecell exports OTLP over HTTP. Set it to http/protobuf or http/json.`,
  });
  return undefined;
}

/** `OTEL_TRACES_SAMPLER` (+ `_ARG`) as the spec names them; the block's `sampleRatio` wins. */
function samplerOf(
  block: TelemetryBlock | undefined,
  env: NodeJS.ProcessEnv,
  file: string,
  problems: ConfigProblem[],
): TelemetrySettings["sampler"] {
  if (block?.sampleRatio !== undefined) return { kind: "ratio", ratio: block.sampleRatio, parentBased: true };
  const name = env.OTEL_TRACES_SAMPLER?.trim() || "parentbased_always_on";
  const argument = Number(env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  const ratio = Number.isFinite(argument) && argument >= 0 && argument <= 1 ? argument : 1;
  switch (name) {
    case "always_on":
      return { kind: "always_on", ratio: 1, parentBased: false };
    case "always_off":
      return { kind: "always_off", ratio: 0, parentBased: false };
    case "traceidratio":
      return { kind: "ratio", ratio, parentBased: false };
    case "parentbased_always_on":
      return { kind: "always_on", ratio: 1, parentBased: true };
    case "parentbased_always_off":
      return { kind: "always_off", ratio: 0, parentBased: true };
    case "parentbased_traceidratio":
      return { kind: "ratio", ratio, parentBased: true };
    default:
      problems.push({
        file,
        path: "",
        message: `OTEL_TRACES_SAMPLER=${name} is not one codecell knows. Use always_on, always_off, traceidratio or their parentbased_ forms.`,
      });
      return { kind: "always_on", ratio: 1, parentBased: true };
  }
}

const withPath = (base: string, path: string) => `${base.replace(/\/+$/, "")}${path}`;

/** What the gateway exports, or null when telemetry is off (no SDK is loaded then). */
export function resolveTelemetry(
  block: TelemetryBlock | undefined,
  env: NodeJS.ProcessEnv,
  file: string,
  problems: ConfigProblem[],
): TelemetrySettings | null {
  if (block?.enabled === false || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return null;
  const base = block?.endpoint ?? (env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined);
  const tracesOff = block?.tracesEndpoint === undefined && env.OTEL_TRACES_EXPORTER?.trim() === "none";
  const metricsOff = block?.metricsEndpoint === undefined && env.OTEL_METRICS_EXPORTER?.trim() === "none";
  const tracesUrl = tracesOff
    ? null
    : (block?.tracesEndpoint ??
      (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (base ? withPath(base, "/v1/traces") : null)));
  const metricsUrl = metricsOff
    ? null
    : (block?.metricsEndpoint ??
      (env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT || (base ? withPath(base, "/v1/metrics") : null)));
  if (tracesUrl === null && metricsUrl === null) return null;
  const general =
    block?.protocol ??
    protocolOf(env.OTEL_EXPORTER_OTLP_PROTOCOL, "OTEL_EXPORTER_OTLP_PROTOCOL", file, problems);
  const tracesProtocol =
    block?.protocol ??
    protocolOf(
      env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      file,
      problems,
    ) ??
    general ??
    "http/protobuf";
  const metricsProtocol =
    block?.protocol ??
    protocolOf(
      env.OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
      "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
      file,
      problems,
    ) ??
    general ??
    "http/protobuf";
  const intervalFromEnv = Number(env.OTEL_METRIC_EXPORT_INTERVAL);
  return {
    serviceName: block?.serviceName ?? (env.OTEL_SERVICE_NAME || "codecell"),
    resourceAttributes: { ...block?.resourceAttributes },
    headers: { ...block?.headers },
    tracesUrl,
    tracesProtocol,
    metricsUrl,
    metricsProtocol,
    metricsIntervalMs:
      block?.metricsIntervalSeconds !== undefined
        ? block.metricsIntervalSeconds * 1000
        : Number.isFinite(intervalFromEnv) && intervalFromEnv > 0
          ? intervalFromEnv
          : DEFAULT_METRICS_INTERVAL_MS,
    sampler: samplerOf(block, env, file, problems),
    honorClientSampling: block?.honorClientSampling ?? true,
    recordInputs: block?.recordInputs ?? false,
    recordOutputs: block?.recordOutputs ?? false,
  };
}
