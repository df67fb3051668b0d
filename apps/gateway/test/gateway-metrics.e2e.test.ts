import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../src/config/load-config.js";
import { Gateway } from "../src/gateway.js";
import { NO_APPROVAL_CLIENT } from "../src/mcp/approvals.js";
import { makeSetup } from "./harness.js";

// The gateway's instruments in process: prom-client's own registry read back as JSON (histogram counts
// with their labels), and the same instruments through an OpenTelemetry meter with an in-memory reader.

type PromMetric = {
  name: string;
  values: Array<{ value: number; labels: Record<string, string | number>; metricName?: string }>;
};

describe("gateway metrics", () => {
  let gateway: Gateway;
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });

  beforeAll(async () => {
    const setup = makeSetup({
      tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
      workspace: "./workspace",
    });
    const loaded = loadGatewayConfig(setup.configPath);
    if (!loaded.config) throw new Error(JSON.stringify(loaded.problems));
    gateway = await Gateway.start(loaded.config, { connectMcp: false, log: () => {} });
  });
  afterAll(async () => {
    await gateway?.close();
    await meterProvider.shutdown();
  });

  it("counts nothing until metrics are enabled, then exactly what ran", async () => {
    expect(gateway.metrics).toBeNull();
    const session = gateway.openSession("metrics-1", NO_APPROVAL_CLIENT);
    // Before enableMetrics: not counted anywhere.
    expect(await session.exec({ code: "return 1" })).toMatchObject({ status: "completed" });
    const metrics = await gateway.enableMetrics(meterProvider.getMeter("test"));
    expect(await gateway.enableMetrics()).toBe(metrics);

    expect(
      await session.exec({
        code: `await tools.read_file({ path: "todo.md" });
          let failed = false;
          try { await tools.read_file({ path: "no/such/file.md" }); } catch { failed = true; }
          return failed;`,
      }),
    ).toMatchObject({ status: "completed", value: true });
    expect(await session.exec({ code: "throw new Error('boom')" })).toMatchObject({ status: "failed" });
    const waiting = await session.exec({ code: "await yield_control(); return 2" });
    expect(waiting.status).toBe("waiting");
    if (waiting.status === "waiting") {
      expect(await session.wait({ runId: waiting.runId })).toMatchObject({ status: "completed", value: 2 });
    }

    const json = (await metrics.registry.getMetricsAsJSON()) as unknown as PromMetric[];
    const values = (name: string) => json.find((metric) => metric.name === name)?.values ?? [];
    const total = (name: string, labels: Record<string, string>, metricName?: string) =>
      values(name)
        .filter((value) => metricName === undefined || value.metricName === metricName)
        .filter((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted))
        .reduce((sum, value) => sum + value.value, 0);
    expect(total("codecell_control_calls_total", { tool: "exec", status: "completed" })).toBe(1);
    expect(total("codecell_control_calls_total", { tool: "exec", status: "failed" })).toBe(1);
    expect(total("codecell_control_calls_total", { tool: "exec", status: "waiting" })).toBe(1);
    expect(total("codecell_control_calls_total", { tool: "wait", status: "completed" })).toBe(1);
    expect(total("codecell_control_calls_total", {})).toBe(4);
    expect(
      values("codecell_control_calls_total").find((value) => value.labels.status === "failed")?.labels.code,
    ).toMatch(/\S/);
    expect(
      total("codecell_nested_calls_total", { source: "core", via: "tools.call", outcome: "completed" }),
    ).toBe(1);
    expect(total("codecell_nested_calls_total", { source: "core", outcome: "failed" })).toBe(1);
    const durationCount = "codecell_control_call_duration_seconds_count";
    expect(total("codecell_control_call_duration_seconds", { tool: "exec" }, durationCount)).toBe(3);
    expect(total("codecell_control_call_duration_seconds", { tool: "wait" }, durationCount)).toBe(1);
    expect(
      total(
        "codecell_nested_call_duration_seconds",
        { source: "core" },
        "codecell_nested_call_duration_seconds_count",
      ),
    ).toBe(2);
    expect(total("codecell_snapshot_bytes", { kind: "suspend" }, "codecell_snapshot_bytes_count")).toBe(1);
    expect(total("codecell_snapshot_bytes", { kind: "restore" }, "codecell_snapshot_bytes_count")).toBe(1);
    expect(total("codecell_sessions", {})).toBe(1);
    expect(total("codecell_waiting_runs", { state: "waiting" })).toBe(0);
    expect(total("codecell_sandbox_workers", { state: "busy" })).toBe(0);
    expect(total("codecell_sandbox_workers", { state: "idle" })).toBeGreaterThanOrEqual(1);

    // The same through OpenTelemetry.
    await reader.forceFlush();
    const exported = exporter
      .getMetrics()
      .at(-1)!
      .scopeMetrics.flatMap((scope) => scope.metrics);
    const otel = (name: string) => exported.find((metric) => metric.descriptor.name === name);
    const points = otel("codecell.control.calls")!.dataPoints as Array<{
      value: number;
      attributes: Record<string, unknown>;
    }>;
    expect(points.reduce((sum, point) => sum + point.value, 0)).toBe(4);
    const nested = otel("codecell.nested.calls")!.dataPoints as Array<{
      value: number;
      attributes: Record<string, unknown>;
    }>;
    expect(nested.find((point) => point.attributes.outcome === "failed")?.value).toBe(1);
    expect(otel("codecell.sessions")).toBeDefined();
    expect(otel("codecell.sandbox.workers")).toBeDefined();
    session.end();
  });

  it("counts agent requests, model calls and tokens with their labels, and reads readiness when told where", async () => {
    const metrics = await gateway.enableMetrics(meterProvider.getMeter("test"));
    const read = async () => (await metrics.registry.getMetricsAsJSON()) as unknown as PromMetric[];
    const sampleOf = (json: PromMetric[], name: string) =>
      json.find((metric) => metric.name === name)?.values;
    // No readiness to read (no HTTP transport): not ready, and no state rather than a made-up one.
    expect(sampleOf(await read(), "codecell_ready")?.map((value) => value.value)).toEqual([0]);
    expect(sampleOf(await read(), "codecell_readiness_state")).toEqual([]);
    let state: "starting" | "ready" | "draining" = "ready";
    metrics.watchReadiness(() => state);

    metrics.agentRequestEnded({ api: "chat_completions", statusCode: 200, errorType: "", durationMs: 1200 });
    metrics.agentRequestEnded({
      api: "messages",
      statusCode: 502,
      errorType: "upstream_error",
      durationMs: 30,
    });
    metrics.modelCallEnded({ outcome: "ok", durationMs: 800, inputTokens: 100, outputTokens: 12 });
    metrics.modelCallEnded({ outcome: "upstream_error", durationMs: 20, inputTokens: 0, outputTokens: 0 });

    let json = await read();
    expect(sampleOf(json, "codecell_agent_requests_total")).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          value: 1,
          labels: { api: "chat_completions", status_code: "200", error_type: "" },
        }),
        expect.objectContaining({
          value: 1,
          labels: { api: "messages", status_code: "502", error_type: "upstream_error" },
        }),
      ]),
    );
    const counts = (name: string) =>
      (sampleOf(json, name) ?? []).filter((value) => value.metricName === `${name}_count`);
    expect(counts("codecell_agent_request_duration_seconds").map((value) => value.labels)).toEqual(
      expect.arrayContaining([
        { api: "chat_completions", error_type: "" },
        { api: "messages", error_type: "upstream_error" },
      ]),
    );
    expect(
      Object.fromEntries(
        (sampleOf(json, "codecell_model_calls_total") ?? []).map((v) => [v.labels.outcome, v.value]),
      ),
    ).toEqual({ ok: 1, upstream_error: 1 });
    expect(counts("codecell_model_call_duration_seconds")).toHaveLength(2);
    expect(
      Object.fromEntries(
        (sampleOf(json, "codecell_model_tokens_total") ?? []).map((v) => [v.labels.type, v.value]),
      ),
    ).toEqual({ input: 100, output: 12 });
    expect(sampleOf(json, "codecell_ready")?.map((value) => value.value)).toEqual([1]);

    state = "draining";
    json = await read();
    expect(sampleOf(json, "codecell_ready")?.map((value) => value.value)).toEqual([0]);
    expect(
      Object.fromEntries(
        (sampleOf(json, "codecell_readiness_state") ?? []).map((v) => [v.labels.state, v.value]),
      ),
    ).toEqual({ starting: 0, ready: 0, draining: 1 });

    // The same through OpenTelemetry, with the conventions' attribute names.
    await reader.forceFlush();
    const exported = exporter
      .getMetrics()
      .at(-1)!
      .scopeMetrics.flatMap((scope) => scope.metrics);
    const points = (name: string) =>
      (exported.find((metric) => metric.descriptor.name === name)?.dataPoints ?? []) as Array<{
        value: unknown;
        attributes: Record<string, unknown>;
      }>;
    expect(points("codecell.agent.requests").map((point) => point.attributes)).toEqual(
      expect.arrayContaining([
        { api: "chat_completions", "http.response.status_code": 200 },
        { api: "messages", "http.response.status_code": 502, "error.type": "upstream_error" },
      ]),
    );
    expect(points("codecell.model.tokens").map((point) => [point.attributes.type, point.value])).toEqual(
      expect.arrayContaining([
        ["input", 100],
        ["output", 12],
      ]),
    );
    expect(points("codecell.model.calls")).toHaveLength(2);
    expect(points("codecell.ready")).toEqual([
      expect.objectContaining({ value: 0, attributes: { state: "draining" } }),
    ]);
  });
});
