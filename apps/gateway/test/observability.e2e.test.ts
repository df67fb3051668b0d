import parsePrometheusTextFormat, { type MetricFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  baseConfig,
  callCodeMode,
  connectHttp,
  connectStdio,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
  until,
} from "./harness.js";
import { OtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver.js";

// A built `codecell serve --http` with the two standard variables an operator sets, exporting OTLP over
// HTTP to a collector in this test that decodes what it gets; its /metrics read with a Prometheus text
// parser; its stderr in JSON.

const TOKEN = "observability-token-0123456789";
const bearer = { authorization: `Bearer ${TOKEN}` };
// A client's trace: the gateway's spans must join it.
const CLIENT_TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN_ID = "b7ad6b7169203331";
const TRACEPARENT = `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`;

/** Three nested calls, one of them to the memory MCP server. */
const THREE_CALLS = `
  const todo = await tools.read_file({ path: "todo.md" });
  const notes = await Notes.list();
  await MCP.memory.createEntities({ entities: [{ name: "Trace", entityType: "test", observations: ["seen"] }] });
  return [todo.content.length > 0, Array.isArray(notes)];
`;

function gatewaySetup() {
  return makeSetup(
    baseConfig({
      tools: { codeMode: { enabled: true, timeoutMs: 10_000 } },
      http: { tokens: [{ name: "operator", token: TOKEN }] },
    }),
  );
}

async function scrape(gateway: HttpGateway): Promise<MetricFamily[]> {
  const response = await fetch(`${gateway.url}metrics`, { headers: bearer });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/plain");
  return parsePrometheusTextFormat(await response.text());
}

/** The value of one counter or gauge sample whose labels include `labels` (0 when absent). */
function sample(families: MetricFamily[], name: string, labels: Record<string, string> = {}): number {
  const family = families.find((candidate) => candidate.name === name);
  const matches = (family?.metrics ?? []).filter((metric) =>
    Object.entries(labels).every(([key, value]) => metric.labels?.[key] === value),
  );
  return matches.reduce((sum, metric) => sum + Number(metric.value ?? metric.count ?? 0), 0);
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);

describe("codecell serve --http exporting OTLP/HTTP (http/protobuf) with /metrics and JSON logs", () => {
  let collector: OtlpReceiver;
  let gateway: HttpGateway;

  beforeAll(async () => {
    collector = await OtlpReceiver.start();
    gateway = await startHttpGateway(gatewaySetup().configPath, {
      args: ["--log-format", "json"],
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_SERVICE_NAME: "codecell-under-test",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test",
        // Short export delays, so the test does not wait the defaults (5 s, 60 s).
        OTEL_BSP_SCHEDULE_DELAY: "100",
        OTEL_METRIC_EXPORT_INTERVAL: "500",
      },
    });
  }, 60_000);

  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
    await collector?.close();
  });

  it("/metrics needs the bearer token like /mcp (only /healthz does not)", async () => {
    const missing = await fetch(`${gateway.url}metrics`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="codecell"');
    const wrong = await fetch(`${gateway.url}metrics`, {
      headers: { authorization: "Bearer not-the-token-at-all" },
    });
    expect(wrong.status).toBe(401);
    expect((await fetch(`${gateway.url}healthz`)).status).toBe(200);
  });

  it("a cell with three nested calls (one MCP) is one trace under the client's span: server span, exec span, three tool spans, the downstream MCP request; /metrics moves by exactly what ran", async () => {
    const before = await scrape(gateway);
    const client = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { ...bearer, traceparent: TRACEPARENT } },
    );
    let runId = "";
    try {
      const result = await callCodeMode(client.client, "exec", { code: THREE_CALLS });
      expect(result).toMatchObject({ status: "completed", value: [true, true] });
    } finally {
      await client.close();
    }

    await collector.until(
      () =>
        collector.spans.some((span) => span.name === "execute_tool exec" && span.traceId === CLIENT_TRACE_ID),
      "the exec span",
    );
    await collector.until(
      // The server span ends last and may come in a later batch than its children.
      () =>
        collector.spans.filter((span) => span.traceId === CLIENT_TRACE_ID).length >= 6 &&
        collector.spans.some((span) => span.name === "tools/call exec" && span.traceId === CLIENT_TRACE_ID),
      "the whole trace",
    );
    const spans = collector.spans.filter((span) => span.traceId === CLIENT_TRACE_ID);
    expect(collector.contentTypes.find((entry) => entry.signal === "traces")?.contentType).toBe(
      "application/x-protobuf",
    );
    const server = spans.find((span) => span.name === "tools/call exec")!;
    expect(server).toBeDefined();
    // Joined from the client's traceparent header: same trace, the client's span as parent.
    expect(server.parentSpanId).toBe(CLIENT_SPAN_ID);
    expect(server.kind).toBe(2); // SERVER
    expect(server.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "exec",
      "network.transport": "tcp",
    });
    expect(server.attributes["mcp.session.id"]).toMatch(/\S/);
    expect(server.resource).toMatchObject({
      "service.name": "codecell-under-test",
      "deployment.environment": "test",
    });
    const [exec] = childrenOf(spans, server);
    expect(exec!.name).toBe("execute_tool exec");
    expect(exec!.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "codecell.status": "completed",
      "codecell.nested.calls": 3,
    });
    runId = String(exec!.attributes["codecell.run.id"]);
    expect(runId).toMatch(/\S/);
    const tools = childrenOf(spans, exec!);
    expect(tools.map((span) => span.name).sort()).toEqual([
      "execute_tool create_entities",
      "execute_tool notes_list",
      "execute_tool read_file",
    ]);
    expect(tools.map((span) => span.attributes["codecell.tool.source"]).sort()).toEqual([
      "core",
      "mcp",
      "plugin",
    ]);
    // Inputs are not on spans unless the config opts in.
    for (const tool of tools) expect(tool.attributes["gen_ai.tool.call.arguments"]).toBeUndefined();
    const mcpTool = tools.find((span) => span.attributes["codecell.tool.source"] === "mcp")!;
    const [downstream] = childrenOf(spans, mcpTool);
    expect(downstream).toMatchObject({ name: "tools/call create_entities", kind: 3 }); // CLIENT
    expect(downstream!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "network.transport": "pipe",
    });

    const after = await scrape(gateway);
    const delta = (name: string, labels: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(delta("codecell_control_calls_total", { tool: "exec", status: "completed" })).toBe(1);
    expect(delta("codecell_control_calls_total", {})).toBe(1);
    expect(delta("codecell_nested_calls_total", { source: "core", outcome: "completed" })).toBe(1);
    expect(delta("codecell_nested_calls_total", { source: "plugin", outcome: "completed" })).toBe(1);
    expect(delta("codecell_nested_calls_total", { source: "mcp", via: "mcp", outcome: "completed" })).toBe(1);
    expect(delta("codecell_nested_calls_total", {})).toBe(3);
    // The text parser keeps a histogram's buckets but not its labels (see gateway-metrics.test.ts for counts).
    expect(after.find((family) => family.name === "codecell_control_call_duration_seconds")?.type).toBe(
      "HISTOGRAM",
    );
    expect(sample(after, "codecell_mcp_server_up", { server: "memory", state: "ready" })).toBe(1);
    expect(sample(after, "codecell_sandbox_workers", { state: "idle" })).toBeGreaterThanOrEqual(1);
    expect(sample(after, "codecell_sandbox_workers", { state: "busy" })).toBe(0);
    expect(after.map((family) => family.name)).toEqual(
      expect.arrayContaining(["codecell_waiting_runs", "codecell_sessions", "codecell_snapshot_bytes"]),
    );

    // The same counters through OTLP metrics. A periodic export can fall between the nested call's end
    // and the exec's, so wait for one that carries both.
    await collector.until(
      () =>
        collector.points.some(
          (point) =>
            point.metric === "codecell.nested.calls" &&
            point.attributes.source === "mcp" &&
            point.value === 1,
        ) &&
        collector.points.some(
          (point) => point.metric === "codecell.control.calls" && point.attributes.status === "completed",
        ),
      "the OTLP nested-call and control-call counters",
    );
    const execCalls = collector.points.filter(
      (point) => point.metric === "codecell.control.calls" && point.attributes.status === "completed",
    );
    expect(execCalls.at(-1)?.value).toBe(1);

    // The JSON log has a record for the exec, with its run, session and trace (the log is a pipe of its
    // own, so its line may land just after the answer).
    await until(() => gateway.output().includes('"message":"exec completed"'), "the exec's log record");
    const records = gateway
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records.length).toBeGreaterThan(0);
    for (const record of records) {
      expect(typeof record.level).toBe("string");
      expect(Number.isNaN(Date.parse(String(record.time)))).toBe(false);
      expect(typeof record.message).toBe("string");
    }
    expect(records.find((record) => record.message === "exec completed")).toMatchObject({
      level: "info",
      runId,
      traceId: CLIENT_TRACE_ID,
      nestedCalls: 3,
    });
  }, 60_000);

  it("takes trace context from params._meta.traceparent over the header", async () => {
    const metaTrace = "5b8efff798038103d269b633813fc60c";
    const metaSpan = "eee19b7ec3c1b174";
    const client = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { ...bearer, traceparent: TRACEPARENT } },
    );
    try {
      const result = await client.client.callTool({
        name: "exec",
        arguments: { code: "return 6 * 7" },
        _meta: { traceparent: `00-${metaTrace}-${metaSpan}-01` },
      });
      expect(result.structuredContent).toMatchObject({ status: "completed", value: 42 });
    } finally {
      await client.close();
    }
    await collector.until(
      () =>
        collector.spans.some((span) => span.traceId === metaTrace && span.name === "execute_tool exec") &&
        collector.spans.some((span) => span.traceId === metaTrace && span.name === "tools/call exec"),
      "the exec and server spans in the _meta trace",
    );
    const server = collector.spans.find(
      (span) => span.traceId === metaTrace && span.name === "tools/call exec",
    );
    expect(server?.parentSpanId).toBe(metaSpan);
  }, 30_000);
});

describe("codecell serve --http exporting OTLP/HTTP as http/json", () => {
  let collector: OtlpReceiver;
  let gateway: HttpGateway;

  beforeAll(async () => {
    collector = await OtlpReceiver.start();
    gateway = await startHttpGateway(gatewaySetup().configPath, {
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "100",
      },
    });
  }, 60_000);

  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
    await collector?.close();
  });

  it("exports the same span tree as JSON, and no metrics when only a traces endpoint is set; a suspended run has its suspend and restore spans", async () => {
    const client = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { ...bearer, traceparent: TRACEPARENT } },
    );
    try {
      const waiting = await callCodeMode(client.client, "exec", {
        code: `const notes = await Notes.list(); await yield_control("later"); return notes.length >= 0;`,
      });
      expect(waiting.status).toBe("waiting");
      const done = await callCodeMode(client.client, "wait", { runId: waiting.runId });
      expect(done).toMatchObject({ status: "completed", value: true });
    } finally {
      await client.close();
    }
    await collector.until(
      () =>
        collector.spans.some((span) => span.name === "codecell.snapshot.restore") &&
        collector.spans.some((span) => span.name === "execute_tool wait"),
      "the wait's spans",
    );
    expect(collector.contentTypes.every((entry) => entry.contentType === "application/json")).toBe(true);
    expect(collector.contentTypes.some((entry) => entry.signal === "metrics")).toBe(false);
    const spans = collector.spans.filter((span) => span.traceId === CLIENT_TRACE_ID);
    const exec = spans.find((span) => span.name === "execute_tool exec")!;
    const wait = spans.find((span) => span.name === "execute_tool wait")!;
    const suspend = spans.find((span) => span.name === "codecell.snapshot.suspend")!;
    const restore = spans.find((span) => span.name === "codecell.snapshot.restore")!;
    expect(suspend.parentSpanId).toBe(exec.spanId);
    expect(restore.parentSpanId).toBe(wait.spanId);
    expect(Number(suspend.attributes["codecell.snapshot.bytes"])).toBeGreaterThan(0);
    expect(wait.attributes["codecell.run.id"]).toBe(exec.attributes["codecell.run.id"]);
    expect(childrenOf(spans, exec).map((span) => span.name)).toContain("execute_tool notes_list");
  }, 60_000);
});

describe("codecell serve over stdio exporting OTLP/HTTP", () => {
  it("joins the trace a client sends in params._meta.traceparent (stdio has no headers)", async () => {
    const collector = await OtlpReceiver.start();
    const traceId = "7d1c3f5e9a0b4c2d8e6f1a3b5c7d9e0f";
    const parentId = "1a2b3c4d5e6f7081";
    const client = await connectStdio(gatewaySetup().configPath, {
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
        OTEL_BSP_SCHEDULE_DELAY: "100",
      },
    });
    try {
      const result = await client.client.callTool({
        name: "exec",
        arguments: { code: "return (await Notes.list()).length >= 0" },
        _meta: { traceparent: `00-${traceId}-${parentId}-01` },
      });
      expect(result.structuredContent).toMatchObject({ status: "completed", value: true });
      await collector.until(
        () =>
          collector.spans.some(
            (span) => span.traceId === traceId && span.name === "execute_tool notes_list",
          ) && collector.spans.some((span) => span.traceId === traceId && span.name === "tools/call exec"),
        "the stdio trace",
      );
      const server = collector.spans.find((span) => span.name === "tools/call exec")!;
      expect(server).toMatchObject({ traceId, parentSpanId: parentId });
      expect(server.attributes["network.transport"]).toBe("pipe");
    } finally {
      await client.close();
      await collector.close();
    }
  }, 60_000);
});
