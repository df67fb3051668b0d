import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type { FunctionTool, ResponseInputItem } from "openai/resources/responses/responses";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// Every front (Chat Completions, Messages, Responses) in front of an upstream that speaks OpenAI's
// Responses API (agent.upstream.api: "responses"), with the official clients; the scripted upstream
// speaks the Responses API.

const ALICE = "agent-alice-token-0123456789";
const UPSTREAM_KEY = "upstream-key-123";
const PICK_PARAMETERS: { type: "object"; properties: Record<string, unknown>; required: string[] } = {
  type: "object",
  properties: { pattern: { type: "string" } },
  required: ["pattern"],
};
const PICK_CELL =
  'const picked = await tools.select_file({ pattern: "*.md" }); text("picked " + picked.path); return picked;';

type Body = Record<string, unknown>;
type Item = Record<string, unknown>;
const inputItems = (body: Body | undefined) => (body?.input ?? []) as Item[];
const toolNames = (body: Body | undefined) =>
  ((body?.tools ?? []) as Array<{ name: string }>).map((tool) => tool.name);
/** The last function_call_output of an upstream body (the exec result the model reads), parsed. */
const lastToolResult = (body: Body) => {
  const output = inputItems(body)
    .filter((item) => item.type === "function_call_output")
    .at(-1);
  return JSON.parse(String(output?.output)) as Record<string, unknown>;
};
/** An item's kind as the model read it: its type, or its role for a message. */
const kinds = (body: Body | undefined) =>
  inputItems(body).map((item) => (item.type as string | undefined) ?? `message:${String(item.role)}`);

describe("the agent endpoint on a Responses API upstream", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "responses" });
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
          mcpServers: {},
          http: { tokens: [{ name: "alice", token: ALICE }] },
          agent: {
            upstream: { api: "responses", baseUrl: upstream.baseUrl, apiKey: UPSTREAM_KEY, timeoutMs: 2500 },
            maxModelTurns: 4,
          },
        }),
      ).configPath,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
    upstream.headers.length = 0;
  });

  it("serves a Chat Completions client: exactly exec and wait upstream as Responses function tools, the hidden turns as items", async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const tools: ChatCompletionTool[] = [
      {
        type: "function",
        function: { name: "select_file", description: "Pick a file.", parameters: PICK_PARAMETERS },
      },
    ];
    upstream.script(
      { text: "Let me ask.", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
      (body) => ({ text: `Cell said: ${JSON.stringify(lastToolResult(body).value)}` }),
    );
    const messages: ChatCompletionMessageParam[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "open the readme" },
    ];
    const first = await openai.chat.completions.create({ model: "m", messages, tools, max_tokens: 99 });
    expect(upstream.headers[0]).toMatchObject({ authorization: `Bearer ${UPSTREAM_KEY}` });
    expect(upstream.bodies[0]).toMatchObject({
      model: "m",
      store: false,
      stream: false,
      max_output_tokens: 99,
    });
    expect(toolNames(upstream.bodies[0])).toEqual(["exec", "wait"]);
    const call = first.choices[0]!.message.tool_calls![0]!;
    if (call.type !== "function") throw new Error("not a function call");
    expect(call.function.name).toBe("select_file");
    messages.push(first.choices[0]!.message, {
      role: "tool",
      tool_call_id: call.id,
      content: '{"path":"README.md"}',
    });
    const second = await openai.chat.completions.create({ model: "m", messages, tools });
    expect(second.choices[0]?.message.content).toContain('Cell said: {"path":"README.md"}');
    expect(kinds(upstream.bodies[1])).toEqual([
      "message:system",
      "message:user",
      "message:assistant",
      "function_call",
      "function_call_output",
    ]);
    expect(toolNames(upstream.bodies[1])).toEqual(["exec", "wait"]);
  });

  it("serves a Messages client (@anthropic-ai/sdk), streamed", async () => {
    const anthropic = new Anthropic({
      baseURL: gateway.url.replace(/\/$/, ""),
      apiKey: ALICE,
      maxRetries: 0,
    });
    const tools: Tool[] = [
      { name: "select_file", description: "Pick a file.", input_schema: PICK_PARAMETERS },
    ];
    upstream.script(
      { text: "Asking.", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
      (body) => ({ text: `got ${(lastToolResult(body).value as { path: string }).path}` }),
    );
    const messages: MessageParam[] = [{ role: "user", content: "pick" }];
    let streamed = "";
    const stream = anthropic.messages.stream({
      model: "m",
      max_tokens: 100,
      system: "Terse.",
      messages,
      tools,
    });
    stream.on("text", (text) => {
      streamed += text;
    });
    const first = await stream.finalMessage();
    expect(streamed).toBe("Asking.");
    expect(upstream.bodies[0]).toMatchObject({ stream: true, max_output_tokens: 100 });
    const use = first.content.find((block) => block.type === "tool_use");
    if (use?.type !== "tool_use") throw new Error("no tool_use block");
    messages.push(
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: '{"path":"a.md"}' }] },
    );
    const second = await anthropic.messages.create({
      model: "m",
      max_tokens: 100,
      system: "Terse.",
      messages,
      tools,
    });
    expect(second.content[0]).toMatchObject({ type: "text", text: "got a.md" });
    for (const body of upstream.bodies) expect(toolNames(body)).toEqual(["exec", "wait"]);
  });

  it("serves a Responses client, streamed and not, across previous_response_id", async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const tools: FunctionTool[] = [
      {
        type: "function",
        name: "select_file",
        description: "Pick a file.",
        parameters: PICK_PARAMETERS,
        strict: false,
      },
    ];
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, (body) => ({
      text: `picked ${(lastToolResult(body).value as { path: string }).path}, in pieces`,
    }));
    const first = await openai.responses.create({ model: "m", instructions: "Help.", input: "pick", tools });
    const call = first.output.find((item) => item.type === "function_call");
    if (call?.type !== "function_call") throw new Error("no function call");
    const deltas: string[] = [];
    const helper = openai.responses.stream({
      model: "m",
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"path":"z.md"}' }],
      tools,
    });
    helper.on("response.output_text.delta", (event) => deltas.push(event.delta));
    const second = await helper.finalResponse();
    expect(second.output_text).toBe("picked z.md, in pieces");
    expect(deltas.length).toBeGreaterThan(1);
    expect(upstream.bodies[1]).toMatchObject({ stream: true });
    expect(kinds(upstream.bodies[1])).toEqual([
      "message:system",
      "message:user",
      "function_call",
      "function_call_output",
    ]);
    for (const body of upstream.bodies) expect(toolNames(body)).toEqual(["exec", "wait"]);
  });

  it("streams the text of an upstream that answers stream: true with one JSON body, on every front", async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const anthropic = new Anthropic({
      baseURL: gateway.url.replace(/\/$/, ""),
      apiKey: ALICE,
      maxRetries: 0,
    });
    const whole = () =>
      upstream.script(
        { toolCalls: [{ name: "exec", arguments: { code: "return 3" } }], whole: true },
        { text: "Whole answer.", whole: true },
      );
    const deltas: string[] = [];
    whole();
    for await (const chunk of await openai.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "whole, chat" }],
      tools: [{ type: "function", function: { name: "select_file", parameters: PICK_PARAMETERS } }],
      stream: true,
    })) {
      deltas.push(chunk.choices[0]?.delta.content ?? "");
    }
    expect(deltas.join("")).toBe("Whole answer.");
    whole();
    const message = await anthropic.messages
      .stream({
        model: "m",
        max_tokens: 100,
        messages: [{ role: "user", content: "whole, messages" }],
        tools: [{ name: "select_file", input_schema: PICK_PARAMETERS }],
      })
      .finalMessage();
    expect(message.content.map((block) => (block.type === "text" ? block.text : "")).join("")).toBe(
      "Whole answer.",
    );
    whole();
    const response = await openai.responses
      .stream({
        model: "m",
        input: "whole, responses",
        tools: [{ type: "function", name: "select_file", parameters: PICK_PARAMETERS, strict: false }],
      })
      .finalResponse();
    expect(response.output_text).toBe("Whole answer.");
    expect(upstream.bodies.map((body) => body.stream)).toEqual([true, true, true, true, true, true]);
  });

  it("keeps a reasoning model's encrypted reasoning beside the exec call it led to, across a hand-out and a resume", async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const tools: FunctionTool[] = [
      {
        type: "function",
        name: "select_file",
        description: "Pick a file.",
        parameters: PICK_PARAMETERS,
        strict: false,
      },
    ];
    upstream.script(
      { reasoning: "enc-chain-1", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
      (body) => ({ text: `picked ${(lastToolResult(body).value as { path: string }).path}` }),
    );
    const first = await openai.responses.create({
      model: "m-reasoning",
      input: "pick",
      tools,
      reasoning: { effort: "low" },
      store: false,
    });
    expect(upstream.bodies[0]).toMatchObject({
      reasoning: { effort: "low" },
      include: ["reasoning.encrypted_content"],
      store: false,
    });
    // The client sees no hidden reasoning: only its own tool's call.
    expect(first.output.map((item) => item.type)).toEqual(["function_call"]);
    const call = first.output[0]!;
    if (call.type !== "function_call") throw new Error("no function call");
    const second = await openai.responses.create({
      model: "m-reasoning",
      input: [
        { role: "user", content: "pick" },
        ...(first.output as ResponseInputItem[]),
        { type: "function_call_output", call_id: call.call_id, output: '{"path":"r.md"}' },
      ],
      tools,
      reasoning: { effort: "low" },
      store: false,
    });
    expect(second.output_text).toBe("picked r.md");
    expect(kinds(upstream.bodies[1])).toEqual([
      "message:user",
      "reasoning",
      "function_call",
      "function_call_output",
    ]);
    expect(inputItems(upstream.bodies[1])[1]).toMatchObject({ encrypted_content: "enc-chain-1" });
  });

  it("answers 502 when the upstream calls a tool it was not offered", async () => {
    upstream.script({ toolCalls: [{ name: "select_file", arguments: { pattern: "x" } }] });
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const failure = await openai.responses
      .create({
        model: "m",
        input: "pick",
        tools: [{ type: "function", name: "select_file", parameters: PICK_PARAMETERS, strict: false }],
      })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect(String((failure as Error).message)).toContain("select_file");
  });
});
