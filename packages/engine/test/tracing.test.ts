import { context as otelContext, TraceFlags, trace } from "@opentelemetry/api";
import {
  AlwaysOffSampler,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCodeModeEngine, type NestedCallEvent, traceModelCall } from "../src/index.js";
import { context, hostTools, registerNotesNamespace, startMemoryServer, TestExecutor } from "./support.js";

// The engine's spans through the real OpenTelemetry Node SDK, exported in memory: a provider is
// registered globally (as a host does), so these tests also cover the engine noticing it late.

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let memory: Awaited<ReturnType<typeof startMemoryServer>>;
const nestedEvents: NestedCallEvent[] = [];
const engine = createCodeModeEngine({
  config: { enabled: true, timeoutMs: 5000 },
  observer: { nestedCallEnded: (event) => nestedEvents.push(event) },
  tracing: { recordInputs: true },
  redactInput: (toolId, input) => (toolId.endsWith("read_file") ? { path: "[redacted]" } : input),
});

beforeAll(async () => {
  provider.register();
  memory = await startMemoryServer();
  registerNotesNamespace();
});

afterEach(() => {
  exporter.reset();
  nestedEvents.length = 0;
});

afterAll(async () => {
  await engine.close();
  await memory?.close();
  await provider.shutdown();
  trace.disable();
  otelContext.disable();
});

function prepare() {
  const executor = new TestExecutor();
  executor.mcp = memory.mcp;
  return engine.prepareRun({
    tools: [...hostTools, ...memory.mcp.hostTools()],
    mcpServers: memory.mcp.describeServers(),
    context: context(),
    executor,
  });
}

const byName = (spans: ReadableSpan[], name: string) => spans.filter((span) => span.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe("engine spans", () => {
  it("a cell with three nested calls, one of them MCP, is one exec span with three tool spans and the MCP request under its call", async () => {
    const result = await prepare().exec(
      {
        code: `
          const file = await tools.read_file({ path: "a.txt" });
          const notes = await Notes.list("home");
          await MCP.memory.createEntities({ entities: [{ name: "Ada", entityType: "person", observations: ["traced"] }] });
          return [file.path, notes.length];
        `,
      },
      { toolCallId: "call-1" },
    );
    expect(result).toMatchObject({ status: "completed", value: ["a.txt", 1] });
    const spans = exporter.getFinishedSpans();
    const [exec] = byName(spans, "execute_tool exec");
    expect(exec).toBeDefined();
    expect(exec!.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "exec",
      "gen_ai.tool.call.id": "call-1",
      "gen_ai.conversation.id": "session-1",
      "codecell.status": "completed",
      "codecell.nested.calls": 3,
      "codecell.nested.failed_calls": 0,
    });
    expect(exec!.attributes["codecell.run.id"]).toMatch(/\S/);
    const children = spans.filter((span) => parentOf(span) === exec!.spanContext().spanId);
    expect(children.map((span) => span.name).sort()).toEqual([
      "execute_tool create_entities",
      "execute_tool notes_list",
      "execute_tool read_file",
    ]);
    for (const child of children) {
      expect(child.spanContext().traceId).toBe(exec!.spanContext().traceId);
      expect(child.attributes["gen_ai.operation.name"]).toBe("execute_tool");
      expect(child.attributes["codecell.outcome"]).toBe("completed");
      expect(child.attributes["codecell.run.id"]).toBe(exec!.attributes["codecell.run.id"]);
    }
    const [read] = byName(children, "execute_tool read_file");
    expect(read!.attributes).toMatchObject({
      "codecell.tool.id": "core:host:read_file",
      "codecell.tool.source": "core",
      "codecell.tool.via": "tools.call",
      // Inputs are recorded as the trajectory records them: through the host's redaction.
      "gen_ai.tool.call.arguments": '{"path":"[redacted]"}',
    });
    expect(byName(children, "execute_tool notes_list")[0]!.attributes["codecell.tool.via"]).toBe("namespace");
    const [mcpCall] = byName(children, "execute_tool create_entities");
    expect(mcpCall!.attributes).toMatchObject({
      "codecell.tool.source": "mcp",
      "codecell.tool.via": "mcp",
      "codecell.mcp.server": "memory",
    });
    // The connector's client span for the downstream request is the nested call's child.
    const [downstream] = byName(spans, "tools/call create_entities");
    expect(parentOf(downstream!)).toBe(mcpCall!.spanContext().spanId);
    expect(downstream!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "create_entities",
      "network.transport": "pipe",
    });
    // The metrics hook heard the same three calls.
    expect(nestedEvents.map((event) => [event.source, event.via, event.outcome]).sort()).toEqual([
      ["core", "tools.call", "completed"],
      ["mcp", "mcp", "completed"],
      ["plugin", "namespace", "completed"],
    ]);
  });

  it("a failed nested call and a failed exec carry error.type and an error status", async () => {
    const result = await prepare().exec(
      { code: `await tools.fail_always({}); return 1;` },
      { toolCallId: "call-2" },
    );
    expect(result).toMatchObject({ status: "failed" });
    const spans = exporter.getFinishedSpans();
    const [nested] = byName(spans, "execute_tool fail_always");
    expect(nested!.attributes).toMatchObject({
      "error.type": "nested_tool_failed",
      "codecell.outcome": "failed",
    });
    expect(nested!.status.code).toBe(2);
    const [exec] = byName(spans, "execute_tool exec");
    expect(exec!.attributes["codecell.status"]).toBe("failed");
    if (result.status !== "failed") throw new Error("expected a failure");
    expect(exec!.attributes["error.type"]).toBe(result.code ?? "guest_error");
    expect(exec!.status.code).toBe(2);
  });

  it("a suspended run has a suspend span under its exec, and its wait a restore span", async () => {
    const run = prepare();
    const waiting = await run.exec(
      {
        code: `const value = await tools.slow_echo({ ms: 300, value: 7 }); await yield_control("pause"); return value;`,
      },
      { toolCallId: "call-3" },
    );
    expect(waiting.status).toBe("waiting");
    if (waiting.status !== "waiting") return;
    const done = await run.wait({ runId: waiting.runId }, { toolCallId: "call-4" });
    expect(done).toMatchObject({ status: "completed", value: 7 });
    const spans = exporter.getFinishedSpans();
    const [exec] = byName(spans, "execute_tool exec");
    const [wait] = byName(spans, "execute_tool wait");
    const [suspend] = byName(spans, "codecell.snapshot.suspend");
    const [restore] = byName(spans, "codecell.snapshot.restore");
    expect(parentOf(suspend!)).toBe(exec!.spanContext().spanId);
    expect(suspend!.attributes["codecell.snapshot.bytes"]).toBeGreaterThan(0);
    expect(parentOf(restore!)).toBe(wait!.spanContext().spanId);
    expect(restore!.attributes["codecell.snapshot.bytes"]).toBe(
      suspend!.attributes["codecell.snapshot.bytes"],
    );
    expect(exec!.attributes).toMatchObject({
      "codecell.status": "waiting",
      "codecell.waiting.reason": "yield",
    });
    expect(wait!.attributes["codecell.run.id"]).toBe(waiting.runId);
  });

  it("joins the trace of the context the host made active (a client's traceparent)", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parentSpanId = "00f067aa0ba902b7";
    const remote = trace.setSpanContext(otelContext.active(), {
      traceId,
      spanId: parentSpanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    const result = await otelContext.with(remote, () =>
      prepare().exec({ code: "return await tools.read_file({ path: 'b' })" }, { toolCallId: "call-5" }),
    );
    expect(result.status).toBe("completed");
    const spans = exporter.getFinishedSpans();
    const [exec] = byName(spans, "execute_tool exec");
    expect(exec!.spanContext().traceId).toBe(traceId);
    expect(parentOf(exec!)).toBe(parentSpanId);
    expect(spans.every((span) => span.spanContext().traceId === traceId)).toBe(true);
  });

  it("records nothing when the sampler keeps nothing, and makes no nested span either", async () => {
    const dropped = new InMemorySpanExporter();
    const unsampled = new NodeTracerProvider({
      sampler: new AlwaysOffSampler(),
      spanProcessors: [new SimpleSpanProcessor(dropped)],
    });
    trace.disable();
    unsampled.register();
    try {
      const result = await prepare().exec(
        { code: "await tools.read_file({ path: 'c' }); return await Notes.list();" },
        { toolCallId: "call-6" },
      );
      expect(result.status).toBe("completed");
      expect(dropped.getFinishedSpans()).toEqual([]);
      // Metrics do not depend on sampling.
      expect(nestedEvents).toHaveLength(2);
    } finally {
      await unsampled.shutdown();
      trace.disable();
      provider.register();
    }
  });

  it("traceModelCall names an upstream model call after the GenAI chat conventions", async () => {
    const span = traceModelCall({
      providerName: "openai",
      requestModel: "gpt-test",
      serverAddress: "127.0.0.1",
    });
    expect(span).not.toBeNull();
    span!.end({ responseModel: "gpt-test-1", inputTokens: 12, outputTokens: 3, finishReasons: ["stop"] });
    const [chat] = exporter.getFinishedSpans();
    expect(chat!.name).toBe("chat gpt-test");
    expect(chat!.kind).toBe(2);
    expect(chat!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-test",
      "gen_ai.response.model": "gpt-test-1",
      "gen_ai.usage.input_tokens": 12,
      "gen_ai.usage.output_tokens": 3,
      "gen_ai.response.finish_reasons": ["stop"],
    });
  });
});
