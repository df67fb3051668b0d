import { describe, expect, it } from "vitest";
import type { ConfigProblem } from "../../src/config/config-problem.js";
import { resolveTelemetry } from "../../src/config/telemetry-config.js";

const resolve = (block: Parameters<typeof resolveTelemetry>[0], env: NodeJS.ProcessEnv) => {
  const problems: ConfigProblem[] = [];
  return { settings: resolveTelemetry(block, env, "codecell.json5", problems), problems };
};

describe("telemetry settings from the telemetry block and OTEL_*", () => {
  it.each([
    ["nothing configured", undefined, {}],
    [
      "OTEL_SDK_DISABLED",
      undefined,
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" },
    ],
    ["enabled: false", { enabled: false, endpoint: "http://c:4318" }, {}],
    [
      "both exporters none",
      undefined,
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_TRACES_EXPORTER: "none",
        OTEL_METRICS_EXPORTER: "none",
      },
    ],
  ])("is off with %s (no SDK is loaded)", (_name, block, env) => {
    expect(resolve(block, env).settings).toBeNull();
  });

  it("takes the two standard variables an operator sets", () => {
    const { settings, problems } = resolve(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
      OTEL_SERVICE_NAME: "gateway-eu",
    });
    expect(problems).toEqual([]);
    expect(settings).toMatchObject({
      serviceName: "gateway-eu",
      tracesUrl: "http://collector:4318/v1/traces",
      metricsUrl: "http://collector:4318/v1/metrics",
      tracesProtocol: "http/protobuf",
      sampler: { kind: "always_on", parentBased: true },
      recordInputs: false,
      recordOutputs: false,
    });
  });

  it("lets signal endpoints and protocols override the general ones, and the block override the environment", () => {
    expect(
      resolve(undefined, {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:4318/custom",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "http/protobuf",
      }).settings,
    ).toMatchObject({ tracesUrl: "http://t:4318/custom", metricsUrl: null, tracesProtocol: "http/json" });
    expect(
      resolve(
        {
          endpoint: "http://block:4318",
          protocol: "http/json",
          serviceName: "from-block",
          sampleRatio: 0.25,
          recordInputs: true,
        },
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://env:4318",
          OTEL_SERVICE_NAME: "from-env",
          OTEL_TRACES_SAMPLER: "always_off",
        },
      ).settings,
    ).toMatchObject({
      tracesUrl: "http://block:4318/v1/traces",
      tracesProtocol: "http/json",
      metricsProtocol: "http/json",
      serviceName: "from-block",
      sampler: { kind: "ratio", ratio: 0.25, parentBased: true },
      recordInputs: true,
    });
  });

  it.each([
    ["always_off", { kind: "always_off", parentBased: false }],
    ["traceidratio", { kind: "ratio", ratio: 0.5, parentBased: false }],
    ["parentbased_traceidratio", { kind: "ratio", ratio: 0.5, parentBased: true }],
  ])("reads OTEL_TRACES_SAMPLER=%s", (sampler, expected) => {
    const { settings } = resolve(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_TRACES_SAMPLER: sampler,
      OTEL_TRACES_SAMPLER_ARG: "0.5",
    });
    expect(settings?.sampler).toMatchObject(expected);
  });

  it("refuses grpc and an unknown sampler with what to set instead", () => {
    const { problems } = resolve(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_TRACES_SAMPLER: "jaeger_remote",
    });
    expect(problems.map((problem) => problem.message)).toEqual([
      expect.stringContaining(
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: codecell exports OTLP over HTTP. Set it to http/protobuf or http/json.",
      ),
      expect.stringContaining("OTEL_TRACES_SAMPLER=jaeger_remote is not one codecell knows"),
    ]);
  });
});
