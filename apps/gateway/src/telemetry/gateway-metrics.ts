import type { ControlCallEvent, NestedCallEvent, SnapshotIoEvent } from "@codecell/engine";
import type { Meter } from "@opentelemetry/api";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Gateway } from "../gateway.js";
import type { ReadinessState } from "../http/readiness.js";

/** Seconds: from a quick cell (a few ms) to the longest budget a cell may have. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Nested calls are quicker: from microseconds (an in-process tool) to a slow downstream server. */
const NESTED_BUCKETS = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30];
/** Bytes: from a small compressed snapshot up to a run holding a large heap. */
const SNAPSHOT_BUCKETS = [64e3, 256e3, 512e3, 1e6, 2e6, 4e6, 8e6, 16e6, 32e6, 64e6];
/** Seconds: an agent request or a model call, from a cached answer to a long multi-turn run. */
const MODEL_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

const READINESS_STATES: readonly ReadinessState[] = ["starting", "ready", "draining"];

/** One agent-endpoint request that ended. */
export type AgentRequestEvent = {
  api: "chat_completions" | "messages" | "responses";
  /** The HTTP status answered; null when the client went away before any answer. */
  statusCode: number | null;
  /** The failure's kind (an agent error kind, or the HTTP status of a passed-through answer); "" when it succeeded. */
  errorType: string;
  durationMs: number;
};

/** One upstream model call of the agent loop that ended. */
export type ModelCallEvent = {
  /** "ok", or the failure's agent error kind (`upstream_error`, `upstream_unavailable`, ...). */
  outcome: string;
  durationMs: number;
  inputTokens: number;
  outputTokens: number;
};

/** The same counters and histograms as OpenTelemetry instruments. */
type OtelInstruments = {
  controlCalls: ReturnType<Meter["createCounter"]>;
  controlDuration: ReturnType<Meter["createHistogram"]>;
  nestedCalls: ReturnType<Meter["createCounter"]>;
  nestedDuration: ReturnType<Meter["createHistogram"]>;
  snapshotBytes: ReturnType<Meter["createHistogram"]>;
  agentRequests: ReturnType<Meter["createCounter"]>;
  agentDuration: ReturnType<Meter["createHistogram"]>;
  modelCalls: ReturnType<Meter["createCounter"]>;
  modelDuration: ReturnType<Meter["createHistogram"]>;
  modelTokens: ReturnType<Meter["createCounter"]>;
};

type Gauges = {
  waitingRuns: number;
  runningRuns: number;
  sessions: number;
  workersBusy: number;
  workersIdle: number;
  servers: Array<{ server: string; state: string; ready: number; tools: number }>;
};

/**
 * The gateway's instruments, kept in a prom-client registry that `GET /metrics` renders as Prometheus
 * text and, when OTLP is configured, mirrored to an OpenTelemetry meter (the same names in OTel's
 * dotted form, the same labels as attributes). Counters and histograms count what the engine reports
 * as it happens; gauges are read when scraped (or exported).
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #controlCalls: Counter<"tool" | "status" | "code">;
  readonly #controlDuration: Histogram<"tool" | "status">;
  readonly #nestedCalls: Counter<"source" | "via" | "outcome">;
  readonly #nestedDuration: Histogram<"source" | "outcome">;
  readonly #snapshotBytes: Histogram<"kind">;
  readonly #agentRequests: Counter<"api" | "status_code" | "error_type">;
  readonly #agentDuration: Histogram<"api" | "error_type">;
  readonly #modelCalls: Counter<"outcome">;
  readonly #modelDuration: Histogram<"outcome">;
  readonly #modelTokens: Counter<"type">;
  readonly #otel: OtelInstruments | null;
  /**
   * Where the readiness gauges read the state; unset where nothing probes (no HTTP transport): then
   * `codecell_ready` reads 0 (prom-client keeps a gauge without labels at 0) and the state has no sample.
   */
  #readiness: (() => ReadinessState) | null = null;

  constructor(
    readonly gateway: Gateway,
    meter: Meter | null,
  ) {
    const registers = [this.registry];
    this.#controlCalls = new Counter({
      name: "codecell_control_calls_total",
      help: "exec and wait calls that ended, by tool, status (completed, waiting, failed) and error code.",
      labelNames: ["tool", "status", "code"],
      registers,
    });
    this.#controlDuration = new Histogram({
      name: "codecell_control_call_duration_seconds",
      help: "How long exec and wait calls took, by tool and status.",
      labelNames: ["tool", "status"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.#nestedCalls = new Counter({
      name: "codecell_nested_calls_total",
      help: "Nested tool calls that ended, by the tool's source, how the cell reached it and the outcome.",
      labelNames: ["source", "via", "outcome"],
      registers,
    });
    this.#nestedDuration = new Histogram({
      name: "codecell_nested_call_duration_seconds",
      help: "How long nested tool calls took, by source and outcome.",
      labelNames: ["source", "outcome"],
      buckets: NESTED_BUCKETS,
      registers,
    });
    this.#snapshotBytes = new Histogram({
      name: "codecell_snapshot_bytes",
      help: "Sizes of suspended runs' snapshots, written (suspend) and read back (restore).",
      labelNames: ["kind"],
      buckets: SNAPSHOT_BUCKETS,
      registers,
    });
    // The agent endpoint's instruments. The request's model is not a label: clients name it, so its
    // values are theirs to multiply (it is on the request's span as gen_ai.request.model).
    this.#agentRequests = new Counter({
      name: "codecell_agent_requests_total",
      help: "Agent endpoint requests (POST /v1/chat/completions, /v1/messages) that ended, by API, HTTP status (empty when the client went away first) and error type (empty when it succeeded).",
      labelNames: ["api", "status_code", "error_type"],
      registers,
    });
    this.#agentDuration = new Histogram({
      name: "codecell_agent_request_duration_seconds",
      help: "How long agent endpoint requests took, model calls and cells included, by API and error type.",
      labelNames: ["api", "error_type"],
      buckets: MODEL_BUCKETS,
      registers,
    });
    this.#modelCalls = new Counter({
      name: "codecell_model_calls_total",
      help: "Upstream model calls of code mode on the agent endpoint that ended, by outcome (ok, or the error kind).",
      labelNames: ["outcome"],
      registers,
    });
    this.#modelDuration = new Histogram({
      name: "codecell_model_call_duration_seconds",
      help: "How long upstream model calls took, by outcome.",
      labelNames: ["outcome"],
      buckets: MODEL_BUCKETS,
      registers,
    });
    this.#modelTokens = new Counter({
      name: "codecell_model_tokens_total",
      help: "Tokens the upstream model reported for code mode's calls, by type (input, output).",
      labelNames: ["type"],
      registers,
    });
    const readinessOf = () => this.#readiness?.() ?? null;
    new Gauge({
      name: "codecell_ready",
      help: "1 when this replica takes new MCP sessions (GET /readyz answers 200), else 0.",
      registers,
      collect() {
        this.set(readinessOf() === "ready" ? 1 : 0);
      },
    });
    new Gauge({
      name: "codecell_readiness_state",
      help: "1 for the replica's readiness state (starting, ready, draining), 0 for the others.",
      labelNames: ["state"],
      registers,
      collect() {
        const state = readinessOf();
        this.reset();
        if (state === null) return;
        for (const candidate of READINESS_STATES) this.set({ state: candidate }, candidate === state ? 1 : 0);
      },
    });
    // Gauges are read at scrape time, all from one read of the gateway's state.
    let pending: Promise<Gauges> | null = null;
    const read = () => {
      pending ??= this.#readGauges().finally(() => {
        pending = null;
      });
      return pending;
    };
    new Gauge({
      name: "codecell_waiting_runs",
      help: "Suspended code-mode runs in the snapshot store (waiting for wait), and runs a wait is driving.",
      labelNames: ["state"],
      registers,
      async collect() {
        const gauges = await read();
        this.set({ state: "waiting" }, gauges.waitingRuns);
        this.set({ state: "running" }, gauges.runningRuns);
      },
    });
    new Gauge({
      name: "codecell_sessions",
      help: "Live MCP client sessions.",
      registers,
      async collect() {
        this.set((await read()).sessions);
      },
    });
    new Gauge({
      name: "codecell_sandbox_workers",
      help: "Sandbox worker threads, busy (running a cell) or idle.",
      labelNames: ["state"],
      registers,
      async collect() {
        const gauges = await read();
        this.set({ state: "busy" }, gauges.workersBusy);
        this.set({ state: "idle" }, gauges.workersIdle);
      },
    });
    new Gauge({
      name: "codecell_mcp_server_up",
      help: "1 when a downstream MCP server is connected and ready, else 0; its state as a label.",
      labelNames: ["server", "state"],
      registers,
      async collect() {
        this.reset();
        for (const server of (await read()).servers) {
          this.set({ server: server.server, state: server.state }, server.ready);
        }
      },
    });
    new Gauge({
      name: "codecell_mcp_server_tools",
      help: "Tools a downstream MCP server listed.",
      labelNames: ["server"],
      registers,
      async collect() {
        this.reset();
        for (const server of (await read()).servers) this.set({ server: server.server }, server.tools);
      },
    });
    this.#otel = meter ? this.#otelInstruments(meter, read, readinessOf) : null;
  }

  /** The readiness gauges read `state` from now on (the HTTP transport's readiness). */
  watchReadiness(state: () => ReadinessState): void {
    this.#readiness = state;
  }

  async #readGauges(): Promise<Gauges> {
    const { gateway } = this;
    const stats = await gateway.store.stats().catch(() => null);
    const workers = gateway.engine.sandboxStats();
    return {
      waitingRuns: stats?.waiting ?? 0,
      runningRuns: stats?.running ?? 0,
      sessions: gateway.sessionCount,
      workersBusy: workers?.busyWorkers ?? 0,
      workersIdle: workers ? workers.workers - workers.busyWorkers : 0,
      servers: gateway.connector.status().map(({ server, state, tools }) => ({
        server,
        state,
        ready: state === "ready" ? 1 : 0,
        tools: tools ?? 0,
      })),
    };
  }

  #otelInstruments(
    meter: Meter,
    read: () => Promise<Gauges>,
    readinessOf: () => ReadinessState | null,
  ): OtelInstruments {
    const instruments = {
      controlCalls: meter.createCounter("codecell.control.calls", {
        description: "exec and wait calls that ended",
      }),
      controlDuration: meter.createHistogram("codecell.control.duration", {
        unit: "s",
        description: "How long exec and wait calls took",
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      nestedCalls: meter.createCounter("codecell.nested.calls", {
        description: "Nested tool calls that ended",
      }),
      nestedDuration: meter.createHistogram("codecell.nested.duration", {
        unit: "s",
        description: "How long nested tool calls took",
        advice: { explicitBucketBoundaries: NESTED_BUCKETS },
      }),
      snapshotBytes: meter.createHistogram("codecell.snapshot.size", {
        unit: "By",
        description: "Sizes of suspended runs' snapshots",
        advice: { explicitBucketBoundaries: SNAPSHOT_BUCKETS },
      }),
      agentRequests: meter.createCounter("codecell.agent.requests", {
        description: "Agent endpoint requests that ended",
      }),
      agentDuration: meter.createHistogram("codecell.agent.request.duration", {
        unit: "s",
        description: "How long agent endpoint requests took",
        advice: { explicitBucketBoundaries: MODEL_BUCKETS },
      }),
      modelCalls: meter.createCounter("codecell.model.calls", {
        description: "Upstream model calls of code mode that ended",
      }),
      modelDuration: meter.createHistogram("codecell.model.duration", {
        unit: "s",
        description: "How long upstream model calls took",
        advice: { explicitBucketBoundaries: MODEL_BUCKETS },
      }),
      modelTokens: meter.createCounter("codecell.model.tokens", {
        unit: "{token}",
        description: "Tokens the upstream model reported, by type",
      }),
    };
    const waiting = meter.createObservableGauge("codecell.runs.waiting", {
      description: "Suspended code-mode runs in the snapshot store",
    });
    const sessions = meter.createObservableGauge("codecell.sessions", { description: "Live MCP sessions" });
    const workers = meter.createObservableGauge("codecell.sandbox.workers", {
      description: "Sandbox worker threads by state",
    });
    const serverUp = meter.createObservableGauge("codecell.mcp.server.up", {
      description: "1 when a downstream MCP server is ready",
    });
    const ready = meter.createObservableGauge("codecell.ready", {
      description: "1 when this replica takes new MCP sessions",
    });
    meter.addBatchObservableCallback(
      async (observer) => {
        const gauges = await read();
        observer.observe(waiting, gauges.waitingRuns, { state: "waiting" });
        observer.observe(waiting, gauges.runningRuns, { state: "running" });
        observer.observe(sessions, gauges.sessions);
        observer.observe(workers, gauges.workersBusy, { state: "busy" });
        observer.observe(workers, gauges.workersIdle, { state: "idle" });
        for (const server of gauges.servers) {
          observer.observe(serverUp, server.ready, { server: server.server, state: server.state });
        }
        const state = readinessOf();
        if (state !== null) observer.observe(ready, state === "ready" ? 1 : 0, { state });
      },
      [waiting, sessions, workers, serverUp, ready],
    );
    return instruments;
  }

  controlEnded(event: ControlCallEvent): void {
    const code = event.code ?? "";
    this.#controlCalls.inc({ tool: event.tool, status: event.status, code });
    this.#controlDuration.observe({ tool: event.tool, status: event.status }, event.durationMs / 1000);
    if (this.#otel) {
      this.#otel.controlCalls.add(1, { tool: event.tool, status: event.status, ...(code ? { code } : {}) });
      this.#otel.controlDuration.record(event.durationMs / 1000, { tool: event.tool, status: event.status });
    }
  }

  nestedCallEnded(event: NestedCallEvent): void {
    this.#nestedCalls.inc({ source: event.source, via: event.via, outcome: event.outcome });
    this.#nestedDuration.observe({ source: event.source, outcome: event.outcome }, event.durationMs / 1000);
    if (this.#otel) {
      this.#otel.nestedCalls.add(1, { source: event.source, via: event.via, outcome: event.outcome });
      this.#otel.nestedDuration.record(event.durationMs / 1000, {
        source: event.source,
        outcome: event.outcome,
      });
    }
  }

  snapshot(event: SnapshotIoEvent): void {
    this.#snapshotBytes.observe({ kind: event.kind }, event.bytes);
    this.#otel?.snapshotBytes.record(event.bytes, { kind: event.kind });
  }

  agentRequestEnded(event: AgentRequestEvent): void {
    const labels = {
      api: event.api,
      status_code: String(event.statusCode ?? ""),
      error_type: event.errorType,
    };
    this.#agentRequests.inc(labels);
    this.#agentDuration.observe({ api: event.api, error_type: event.errorType }, event.durationMs / 1000);
    if (this.#otel) {
      const attributes = {
        api: event.api,
        ...(event.statusCode !== null ? { "http.response.status_code": event.statusCode } : {}),
        ...(event.errorType ? { "error.type": event.errorType } : {}),
      };
      this.#otel.agentRequests.add(1, attributes);
      this.#otel.agentDuration.record(event.durationMs / 1000, attributes);
    }
  }

  modelCallEnded(event: ModelCallEvent): void {
    this.#modelCalls.inc({ outcome: event.outcome });
    this.#modelDuration.observe({ outcome: event.outcome }, event.durationMs / 1000);
    if (event.inputTokens > 0) this.#modelTokens.inc({ type: "input" }, event.inputTokens);
    if (event.outputTokens > 0) this.#modelTokens.inc({ type: "output" }, event.outputTokens);
    if (this.#otel) {
      this.#otel.modelCalls.add(1, { outcome: event.outcome });
      this.#otel.modelDuration.record(event.durationMs / 1000, { outcome: event.outcome });
      if (event.inputTokens > 0) this.#otel.modelTokens.add(event.inputTokens, { type: "input" });
      if (event.outputTokens > 0) this.#otel.modelTokens.add(event.outputTokens, { type: "output" });
    }
  }

  /** The Prometheus text exposition of every instrument. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
