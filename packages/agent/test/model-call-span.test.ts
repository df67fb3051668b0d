import type { HostTool } from "@codecell/contract";
import { createCodeModeEngine } from "@codecell/engine";
import { openSnapshotStore, type SnapshotStore } from "@codecell/snapshot-store";
import { context as otelContext, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentLoop, OpenAiUpstream, snapshotStoreConversations, type TurnMessage } from "../src/index.js";
import { type ScriptedUpstream, startScriptedUpstream } from "../src/testing/scripted-upstream.js";

// Each upstream model call of a turn is a `chat <model>` client span (the GenAI conventions), through
// the real OpenTelemetry Node SDK with an in-memory exporter, registered globally as a host does.

const HOST_TOOLS: HostTool[] = [
  {
    name: "weather",
    description: "The weather in a city.",
    parameters: { type: "object" },
    source: "core",
    owner: "host",
  },
];

describe("model-call spans", () => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  let store: SnapshotStore;
  let engine: ReturnType<typeof createCodeModeEngine>;
  let upstream: ScriptedUpstream;
  let loop: AgentLoop;

  beforeAll(async () => {
    provider.register();
    upstream = await startScriptedUpstream();
    store = await openSnapshotStore();
    engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 3000 }, store });
    loop = new AgentLoop({
      engine,
      conversations: snapshotStoreConversations(store),
      upstream: new OpenAiUpstream({ baseUrl: upstream.baseUrl }),
      hostTools: () => ({ tools: HOST_TOOLS, executor: { callTool: () => ({ sky: "clear" }) } }),
    });
  });
  afterAll(async () => {
    await engine?.close();
    await store?.close();
    await upstream?.close();
    await provider.shutdown();
    trace.disable();
    otelContext.disable();
  });

  it("makes one chat span per upstream call, with the model, the server, usage and finish reason", async () => {
    upstream.script(
      {
        toolCalls: [{ name: "exec", arguments: { code: "return (await tools.weather({})).sky" } }],
        usage: { prompt: 100, completion: 7 },
      },
      { text: "It is clear.", usage: { prompt: 130, completion: 4 } },
    );
    const messages: TurnMessage[] = [{ role: "user", content: "weather?" }];
    const result = await loop.drive({
      principal: "p1",
      model: "test-model",
      clientTools: [{ name: "confirm", description: "Ask the user.", parameters: { type: "object" } }],
      params: {},
      messages,
      signal: new AbortController().signal,
    });
    expect(result).toMatchObject({ kind: "answer", content: "It is clear." });

    const spans = exporter.getFinishedSpans();
    const chats = spans.filter((span) => span.name.startsWith("chat "));
    expect(chats.map((span) => span.name)).toEqual(["chat test-model", "chat test-model"]);
    // Each upstream request is an outgoing HTTP call: its headers carry its own span as the parent.
    expect(upstream.headers.slice(-2).map((headers) => headers.traceparent)).toEqual(
      chats.map((span) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`),
    );
    const port = Number(new URL(upstream.baseUrl).port);
    expect(chats[0]!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "test-model",
      "server.address": "127.0.0.1",
      "server.port": port,
      "gen_ai.usage.input_tokens": 100,
      "gen_ai.usage.output_tokens": 7,
      "gen_ai.response.finish_reasons": ["tool_calls"],
    });
    expect(chats[1]!.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 130,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    // The cell the model wrote is traced by the engine beside them.
    expect(spans.some((span) => span.name === "execute_tool exec")).toBe(true);
  });

  it("ends the span of a failed call with the failure's kind", async () => {
    exporter.reset();
    upstream.script({ status: 503, body: { error: { message: "overloaded" } } });
    await expect(
      loop.drive({
        principal: "p1",
        model: "test-model",
        clientTools: [{ name: "confirm", description: "Ask the user.", parameters: { type: "object" } }],
        params: {},
        messages: [{ role: "user", content: "again" }],
        signal: new AbortController().signal,
      }),
    ).rejects.toThrow(/503/);
    const [chat] = exporter.getFinishedSpans().filter((span) => span.name.startsWith("chat "));
    expect(chat?.attributes["error.type"]).toBe("upstream_error");
    expect(chat?.status.code).toBe(2);
  });
});
