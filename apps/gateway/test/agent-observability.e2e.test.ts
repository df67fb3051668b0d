import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import parsePrometheusTextFormat, { type MetricFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { OtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver.js";

// The agent endpoint of a built `codecell serve --http` exporting OTLP to a collector in this test, the
// scripted upstream as its model: one client request is one trace (the HTTP server span, the model
// calls, the hidden cell's exec and its nested calls), the model server gets the trace in its
// request's `traceparent`, and /metrics (read with a Prometheus text parser) counts what ran.

const TOKEN = "agent-observability-token-0123456789";
const CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`;
const TRACESTATE = "vendor=opaque-value";
const SERVER = 2;
const CLIENT = 3;

/** A hidden cell with three nested calls, one of them to the memory MCP server. */
const CELL = `
  const todo = await tools.read_file({ path: "todo.md" });
  const notes = await Notes.list();
  await MCP.memory.createEntities({ entities: [{ name: "AgentTrace", entityType: "test", observations: ["seen"] }] });
  return [todo.content.length > 0, Array.isArray(notes)];
`;

/** A client tool, so the request is code mode's (a request without tools is passed through). */
const CLIENT_TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "select_file",
      description: "Ask the user to pick a file.",
      parameters: { type: "object", properties: { pattern: { type: "string" } } },
    },
  },
];

function client(gateway: HttpGateway, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: TOKEN, maxRetries: 0, defaultHeaders: headers });
}

async function scrape(gateway: HttpGateway): Promise<MetricFamily[]> {
  const response = await fetch(`${gateway.url}metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(response.status).toBe(200);
  return parsePrometheusTextFormat(await response.text());
}

/** The sum of the samples of `name` whose labels include `labels` (0 when there is none). */
function sample(families: MetricFamily[], name: string, labels: Record<string, string> = {}): number {
  const family = families.find((candidate) => candidate.name === name);
  const matches = (family?.metrics ?? []).filter((metric) =>
    Object.entries(labels).every(([key, value]) => (metric.labels?.[key] ?? "") === value),
  );
  // A histogram's observations are its +Inf bucket (the parser keeps neither its count nor its labels).
  return matches.reduce(
    (sum, metric) => sum + Number(metric.value ?? metric.count ?? metric.buckets?.["+Inf"] ?? 0),
    0,
  );
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);

describe("the agent endpoint traced and counted: codecell serve --http exporting OTLP", () => {
  let collector: OtlpReceiver;
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    [collector, upstream] = await Promise.all([OtlpReceiver.start(), startScriptedUpstream()]);
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 10_000 } },
          http: { tokens: [{ name: "operator", token: TOKEN }] },
          agent: { upstream: { baseUrl: upstream.baseUrl, apiKey: "upstream-key-123", timeoutMs: 5000 } },
        }),
      ).configPath,
      {
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
          OTEL_SERVICE_NAME: "codecell-agent-under-test",
          OTEL_BSP_SCHEDULE_DELAY: "100",
          OTEL_METRIC_EXPORT_INTERVAL: "500",
        },
      },
    );
  }, 60_000);

  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
    await upstream?.close();
    await collector?.close();
  });

  beforeEach(() => {
    upstream.bodies.length = 0;
    upstream.headers.length = 0;
  });

  it("a Chat Completions request with a client traceparent is one trace: server span, the model calls and the exec span, its nested calls, the MCP request; the upstream gets the model call's traceparent; /metrics moves by exactly what ran", async () => {
    const before = await scrape(gateway);
    upstream.script(
      { toolCalls: [{ name: "exec", arguments: { code: CELL } }], usage: { prompt: 120, completion: 7 } },
      { text: "Read the file and the notes.", usage: { prompt: 150, completion: 9 } },
    );
    const { data: answer, response } = await client(gateway, {
      traceparent: TRACEPARENT,
      tracestate: TRACESTATE,
    })
      .chat.completions.create({
        model: "m-traced",
        messages: [{ role: "user", content: "what is on my list?" }],
        tools: CLIENT_TOOLS,
      })
      .withResponse();
    expect(answer.choices[0]?.message.content).toBe("Read the file and the notes.");
    const thread = response.headers.get("codecell-thread");
    expect(thread).toMatch(/^thread_/);

    const inTrace = () => collector.spans.filter((span) => span.traceId === CLIENT_TRACE_ID);
    await collector.until(
      () => inTrace().some((span) => span.name === "POST /v1/chat/completions") && inTrace().length >= 8,
      "the agent request's trace",
    );
    const spans = inTrace();
    const server = spans.find((span) => span.name === "POST /v1/chat/completions")!;
    expect(server).toMatchObject({ kind: SERVER, parentSpanId: CLIENT_SPAN_ID, scope: "@codecell/gateway" });
    expect(server.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/chat/completions",
      "url.path": "/v1/chat/completions",
      "http.response.status_code": 200,
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.request.model": "m-traced",
      "gen_ai.conversation.id": thread,
      "codecell.thread.id": thread,
    });
    expect(server.attributes["error.type"]).toBeUndefined();
    expect(server.status.code).toBe(0); // UNSET
    expect(server.resource["service.name"]).toBe("codecell-agent-under-test");

    const children = childrenOf(spans, server);
    expect(children.map((span) => span.name).sort()).toEqual([
      "chat m-traced",
      "chat m-traced",
      "execute_tool exec",
    ]);
    const chats = children.filter((span) => span.name === "chat m-traced");
    for (const chat of chats) {
      expect(chat.kind).toBe(CLIENT);
      expect(chat.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-traced",
      });
    }
    expect(chats.map((chat) => chat.attributes["gen_ai.usage.input_tokens"]).sort()).toEqual([120, 150]);
    // Each upstream request carries its own model call's span as the parent, and the client's tracestate.
    expect(upstream.headers.map((headers) => headers.traceparent).sort()).toEqual(
      chats.map((chat) => `00-${CLIENT_TRACE_ID}-${chat.spanId}-01`).sort(),
    );
    expect(upstream.headers.map((headers) => headers.tracestate)).toEqual([TRACESTATE, TRACESTATE]);
    expect(upstream.headers[0]?.authorization).toBe("Bearer upstream-key-123");

    const exec = children.find((span) => span.name === "execute_tool exec")!;
    expect(exec.attributes).toMatchObject({ "codecell.status": "completed", "codecell.nested.calls": 3 });
    const tools = childrenOf(spans, exec);
    expect(tools.map((span) => span.name).sort()).toEqual([
      "execute_tool create_entities",
      "execute_tool notes_list",
      "execute_tool read_file",
    ]);
    const mcpTool = tools.find((span) => span.attributes["codecell.tool.source"] === "mcp")!;
    expect(childrenOf(spans, mcpTool)).toMatchObject([{ name: "tools/call create_entities", kind: CLIENT }]);
    // Nothing of the request is outside the tree under the server span.
    const reachable = new Set([server.spanId]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const span of spans) {
        if (!reachable.has(span.spanId) && reachable.has(span.parentSpanId)) {
          reachable.add(span.spanId);
          grew = true;
        }
      }
    }
    expect(reachable.size).toBe(spans.length);

    const after = await scrape(gateway);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(
      delta("codecell_agent_requests_total", { api: "chat_completions", status_code: "200", error_type: "" }),
    ).toBe(1);
    expect(delta("codecell_agent_requests_total")).toBe(1);
    // Histograms: observations of every label set (the text parser drops a histogram's labels).
    expect(delta("codecell_agent_request_duration_seconds")).toBe(1);
    expect(delta("codecell_model_calls_total", { outcome: "ok" })).toBe(2);
    expect(delta("codecell_model_calls_total")).toBe(2);
    expect(delta("codecell_model_call_duration_seconds")).toBe(2);
    expect(delta("codecell_model_tokens_total", { type: "input" })).toBe(270);
    expect(delta("codecell_model_tokens_total", { type: "output" })).toBe(16);
    expect(delta("codecell_control_calls_total", { tool: "exec", status: "completed" })).toBe(1);
    expect(delta("codecell_nested_calls_total")).toBe(3);
    expect(sample(after, "codecell_ready")).toBe(1);
    expect(sample(after, "codecell_readiness_state", { state: "ready" })).toBe(1);
    expect(sample(after, "codecell_readiness_state", { state: "starting" })).toBe(0);
    expect(sample(after, "codecell_readiness_state", { state: "draining" })).toBe(0);
    expect(after.find((family) => family.name === "codecell_ready")?.type).toBe("GAUGE");

    // The same through OTLP metrics.
    await collector.until(
      () =>
        collector.points.some(
          (point) =>
            point.metric === "codecell.model.tokens" &&
            point.attributes.type === "input" &&
            point.value >= 270,
        ) && collector.points.some((point) => point.metric === "codecell.ready" && point.value === 1),
      "the OTLP model-token counter and readiness gauge",
    );
  }, 60_000);

  it("a cell that calls a client tool: the exec is in the first request's trace, the resume in the second's", async () => {
    const first = { traceId: "5a000000000000000000000000000001", span: "5a00000000000001" };
    const second = { traceId: "5b000000000000000000000000000002", span: "5b00000000000002" };
    upstream.script(
      {
        toolCalls: [
          {
            name: "exec",
            arguments: {
              code: 'const picked = await tools.select_file({ pattern: "*.md" }); return picked.path;',
            },
          },
        ],
      },
      { text: "You picked it." },
    );
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "pick one" }];
    const handedOut = await client(gateway, {
      traceparent: `00-${first.traceId}-${first.span}-01`,
    }).chat.completions.create({
      model: "m-client-tool",
      messages,
      tools: CLIENT_TOOLS,
    });
    const call = handedOut.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && call.function.name).toBe("select_file");
    messages.push(handedOut.choices[0]!.message, {
      role: "tool",
      tool_call_id: call.id,
      content: JSON.stringify({ path: "README.md" }),
    });
    const answer = await client(gateway, {
      traceparent: `00-${second.traceId}-${second.span}-01`,
    }).chat.completions.create({
      model: "m-client-tool",
      messages,
      tools: CLIENT_TOOLS,
    });
    expect(answer.choices[0]?.message.content).toBe("You picked it.");
    const spansOf = (traceId: string) => collector.spans.filter((span) => span.traceId === traceId);
    await collector.until(
      () =>
        // Each request's server span ends last, so it may come in a later batch than its children.
        spansOf(first.traceId).some((span) => span.name === "execute_tool select_file") &&
        spansOf(first.traceId).some((span) => span.kind === SERVER) &&
        spansOf(second.traceId).some((span) => span.name === "chat m-client-tool") &&
        spansOf(second.traceId).some((span) => span.kind === SERVER),
      "both requests' traces",
    );
    const [firstServer] = spansOf(first.traceId).filter((span) => span.kind === SERVER);
    expect(firstServer).toMatchObject({ name: "POST /v1/chat/completions", parentSpanId: first.span });
    const exec = childrenOf(collector.spans, firstServer!).find((span) => span.name === "execute_tool exec")!;
    expect(exec.attributes["codecell.status"]).toBe("waiting");
    // The client's call is handed out (its span ends there), and the run is written to the store.
    const underExec = childrenOf(collector.spans, exec);
    expect(underExec.map((span) => span.name).sort()).toEqual([
      "codecell.snapshot.suspend",
      "execute_tool select_file",
    ]);
    expect(underExec.find((span) => span.name === "execute_tool select_file")!.attributes).toMatchObject({
      "codecell.tool.source": "client",
      "codecell.outcome": "handed_out",
    });

    const [secondServer] = spansOf(second.traceId).filter((span) => span.kind === SERVER);
    expect(secondServer).toMatchObject({ parentSpanId: second.span });
    const resumed = childrenOf(collector.spans, secondServer!);
    expect(resumed.map((span) => span.name).sort()).toEqual(["chat m-client-tool", "execute_tool wait"]);
    const wait = resumed.find((span) => span.name === "execute_tool wait")!;
    expect(wait.attributes).toMatchObject({
      "codecell.status": "completed",
      "codecell.run.id": exec.attributes["codecell.run.id"],
    });
    expect(childrenOf(collector.spans, wait).map((span) => span.name)).toEqual(["codecell.snapshot.restore"]);
    // Both requests are the same thread.
    expect(secondServer!.attributes["gen_ai.conversation.id"]).toBe(
      firstServer!.attributes["gen_ai.conversation.id"],
    );
  }, 30_000);

  it("a request without traceparent starts a trace of its own, with its model call under its server span", async () => {
    upstream.script({ text: "nothing to run" });
    const answer = await client(gateway).chat.completions.create({
      model: "m-fresh",
      messages: [{ role: "user", content: "hello" }],
      tools: CLIENT_TOOLS,
    });
    expect(answer.choices[0]?.message.content).toBe("nothing to run");
    await collector.until(
      () =>
        collector.spans.some(
          (span) =>
            span.name === "chat m-fresh" &&
            span.parentSpanId !== "" &&
            span.traceId !== CLIENT_TRACE_ID &&
            collector.spans.some((server) => server.spanId === span.parentSpanId),
        ),
      "the fresh trace",
    );
    const chat = collector.spans.find((span) => span.name === "chat m-fresh")!;
    const server = collector.spans.find((span) => span.spanId === chat.parentSpanId)!;
    expect(server).toMatchObject({ name: "POST /v1/chat/completions", kind: SERVER, parentSpanId: "" });
    expect(server.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(server.traceId).not.toBe(CLIENT_TRACE_ID);
    expect(server.attributes["gen_ai.request.model"]).toBe("m-fresh");
    expect(upstream.headers[0]?.traceparent).toBe(`00-${server.traceId}-${chat.spanId}-01`);
  }, 30_000);

  it("a client trace not sampled: nothing of it is exported, and the upstream request still names the trace, flagged not sampled", async () => {
    const traceId = "ee000000000000000000000000000077";
    const clientSpan = "3333333333333333";
    upstream.script({ text: "unsampled" });
    const answer = await client(gateway, {
      traceparent: `00-${traceId}-${clientSpan}-00`,
    }).chat.completions.create({
      model: "m-unsampled",
      messages: [{ role: "user", content: "hello" }],
      tools: CLIENT_TOOLS,
    });
    expect(answer.choices[0]?.message.content).toBe("unsampled");
    const [header] = upstream.headers.map((headers) => headers.traceparent);
    expect(header).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    expect(header).not.toContain(clientSpan);
    // A sampled request after it is exported: had this one's spans been exported, they would be there too.
    const marker = "ee0000000000000000000000000000ff";
    upstream.script({ text: "sampled" });
    await client(gateway, { traceparent: `00-${marker}-4444444444444444-01` }).chat.completions.create({
      model: "m-sampled",
      messages: [{ role: "user", content: "hello" }],
      tools: CLIENT_TOOLS,
    });
    await collector.until(
      () => collector.spans.some((span) => span.traceId === marker && span.kind === SERVER),
      "the sampled request's span",
    );
    expect(collector.spans.filter((span) => span.traceId === traceId)).toEqual([]);
  }, 30_000);

  it("a request passed through (no tools) has its server span and one chat span, whose traceparent the upstream gets; streamed too", async () => {
    const before = await scrape(gateway);
    const traceId = "cd00000000000000000000000000ef01";
    upstream.script(
      { text: "passed", usage: { prompt: 30, completion: 2 } },
      { text: "streamed through", usage: { prompt: 31, completion: 3 } },
    );
    const openai = client(gateway, { traceparent: `00-${traceId}-2222222222222222-01` });
    const answer = await openai.chat.completions.create({
      model: "m-pass",
      messages: [{ role: "user", content: "hello" }],
    });
    expect(answer.choices[0]?.message.content).toBe("passed");
    let streamed = "";
    const stream = await openai.chat.completions.create({
      model: "m-pass-stream",
      messages: [{ role: "user", content: "hello" }],
      stream: true,
    });
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
    expect(streamed).toBe("streamed through");
    await collector.until(
      () => collector.spans.filter((span) => span.traceId === traceId && span.kind === SERVER).length === 2,
      "both passed-through requests' spans",
    );
    const servers = collector.spans.filter((span) => span.traceId === traceId && span.kind === SERVER);
    const chats = servers.map((server) => {
      expect(server).toMatchObject({ name: "POST /v1/chat/completions", parentSpanId: "2222222222222222" });
      const children = childrenOf(collector.spans, server);
      expect(children).toHaveLength(1);
      return children[0]!;
    });
    expect(chats.map((chat) => chat.name).sort()).toEqual(["chat m-pass", "chat m-pass-stream"]);
    const plain = chats.find((chat) => chat.name === "chat m-pass")!;
    expect(plain).toMatchObject({ kind: CLIENT });
    expect(plain.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 30,
      "gen_ai.usage.output_tokens": 2,
      "gen_ai.response.finish_reasons": ["stop"],
    });
    expect(upstream.headers.map((headers) => headers.traceparent).sort()).toEqual(
      chats.map((chat) => `00-${traceId}-${chat.spanId}-01`).sort(),
    );
    // Counted as agent requests; model-call counts are code mode's own calls.
    const after = await scrape(gateway);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(delta("codecell_agent_requests_total", { api: "chat_completions", status_code: "200" })).toBe(2);
    expect(delta("codecell_model_calls_total")).toBe(0);
  }, 30_000);

  it("a failing upstream: the server span says the error's kind and status, the model call failed, and the failure is counted", async () => {
    const before = await scrape(gateway);
    const traceId = "aa0000000000000000000000000000bb";
    upstream.script({ status: 503, body: { error: { message: "overloaded" } } });
    const failed = await client(gateway, { traceparent: `00-${traceId}-00000000000000cc-01` })
      .chat.completions.create({
        model: "m-down",
        messages: [{ role: "user", content: "hello" }],
        tools: CLIENT_TOOLS,
      })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.APIError);
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    await collector.until(
      () => collector.spans.some((span) => span.traceId === traceId && span.kind === SERVER),
      "the failed request's span",
    );
    const server = collector.spans.find((span) => span.traceId === traceId && span.kind === SERVER)!;
    expect(server.attributes).toMatchObject({
      "http.response.status_code": 502,
      "error.type": "upstream_error",
    });
    expect(server.status.code).toBe(2); // ERROR
    const [chat] = childrenOf(collector.spans, server);
    expect(chat).toMatchObject({ name: "chat m-down", kind: CLIENT });
    expect(chat!.attributes["error.type"]).toBe("upstream_error");

    const after = await scrape(gateway);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(
      delta("codecell_agent_requests_total", {
        api: "chat_completions",
        status_code: "502",
        error_type: "upstream_error",
      }),
    ).toBe(1);
    expect(delta("codecell_agent_requests_total")).toBe(1);
    expect(delta("codecell_model_calls_total", { outcome: "upstream_error" })).toBe(1);
    expect(delta("codecell_model_calls_total")).toBe(1);
    expect(delta("codecell_model_tokens_total")).toBe(0);
  }, 30_000);

  it("a client that goes away: the span and the count say aborted, with no status answered", async () => {
    const before = await scrape(gateway);
    const traceId = "ab000000000000000000000000000099";
    upstream.script({ hang: true });
    const gone = new AbortController();
    const request = client(gateway, { traceparent: `00-${traceId}-5555555555555555-01` })
      .chat.completions.create(
        { model: "m-gone", messages: [{ role: "user", content: "hello" }], tools: CLIENT_TOOLS },
        { signal: gone.signal },
      )
      .catch((error: unknown) => error);
    // Bounded: the upstream has the request within a second or two.
    for (let attempt = 0; attempt < 100 && upstream.bodies.length === 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(upstream.bodies).toHaveLength(1);
    gone.abort();
    expect(await request).toBeInstanceOf(Error);
    await collector.until(
      () => collector.spans.some((span) => span.traceId === traceId && span.kind === SERVER),
      "the abandoned request's span",
    );
    const server = collector.spans.find((span) => span.traceId === traceId && span.kind === SERVER)!;
    expect(server.attributes["error.type"]).toBe("aborted");
    expect(server.attributes["http.response.status_code"]).toBeUndefined();
    expect(childrenOf(collector.spans, server)[0]!.attributes["error.type"]).toBe("aborted");
    const after = await scrape(gateway);
    expect(
      sample(after, "codecell_agent_requests_total", { status_code: "", error_type: "aborted" }) -
        sample(before, "codecell_agent_requests_total", { status_code: "", error_type: "aborted" }),
    ).toBe(1);
    expect(
      sample(after, "codecell_model_calls_total", { outcome: "aborted" }) -
        sample(before, "codecell_model_calls_total", { outcome: "aborted" }),
    ).toBe(1);
  }, 30_000);

  it("POST /v1/messages is traced the same way, under its own route, and counted under its API; a bad request is the client's error", async () => {
    const before = await scrape(gateway);
    const traceId = "1234567890abcdef1234567890abcdef";
    upstream.script({ text: "hi from messages" });
    const response = await fetch(`${gateway.url}v1/messages`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-api-key": TOKEN,
        "anthropic-version": "2023-06-01",
        traceparent: `00-${traceId}-1111111111111111-01`,
      },
      body: JSON.stringify({
        model: "m-messages",
        max_tokens: 100,
        messages: [{ role: "user", content: "hello" }],
        tools: [{ name: "select_file", description: "Pick a file.", input_schema: { type: "object" } }],
      }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { content: Array<{ text?: string }> }).content[0]?.text).toBe(
      "hi from messages",
    );
    const bad = await fetch(`${gateway.url}v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": TOKEN },
      body: "{ not json",
    });
    expect(bad.status).toBe(400);
    await collector.until(
      () =>
        collector.spans.some((span) => span.traceId === traceId && span.name === "chat m-messages") &&
        collector.spans.some((span) => span.traceId === traceId && span.kind === SERVER),
      "the Messages request's trace",
    );
    const server = collector.spans.find((span) => span.traceId === traceId && span.kind === SERVER)!;
    expect(server).toMatchObject({ name: "POST /v1/messages", parentSpanId: "1111111111111111" });
    expect(server.attributes).toMatchObject({
      "http.route": "/v1/messages",
      "http.response.status_code": 200,
      "gen_ai.request.model": "m-messages",
    });
    await collector.until(
      () =>
        collector.spans.some(
          (span) => span.name === "POST /v1/messages" && span.attributes["http.response.status_code"] === 400,
        ),
      "the bad request's span",
    );
    const refused = collector.spans.find(
      (span) => span.name === "POST /v1/messages" && span.attributes["http.response.status_code"] === 400,
    )!;
    // A client's mistake: error.type says which, the span's status stays unset (the HTTP conventions).
    expect(refused.attributes["error.type"]).toBe("invalid_request");
    expect(refused.status.code).toBe(0);

    const after = await scrape(gateway);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(
      delta("codecell_agent_requests_total", { api: "messages", status_code: "200", error_type: "" }),
    ).toBe(1);
    expect(
      delta("codecell_agent_requests_total", {
        api: "messages",
        status_code: "400",
        error_type: "invalid_request",
      }),
    ).toBe(1);
    expect(delta("codecell_agent_requests_total")).toBe(2);
    expect(delta("codecell_model_calls_total", { outcome: "ok" })).toBe(1);
  }, 30_000);
});
