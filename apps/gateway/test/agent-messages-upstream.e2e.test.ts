import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { rejectionOf } from "./support/agent-endpoint.js";

// Both fronts (Chat Completions and Messages) in front of an upstream that speaks the Messages API
// (agent.upstream.api: "messages"), with the official clients; the scripted upstream speaks Messages.

const ALICE = "agent-alice-token-0123456789";
const UPSTREAM_KEY = "upstream-key-123";
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

const MESSAGES_TOOLS: Tool[] = [
  {
    name: "select_file",
    description: "Ask the user to pick a file in the editor.",
    input_schema: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
  },
];
const PICK_PARAMETERS = {
  type: "object",
  properties: { pattern: { type: "string" } },
  required: ["pattern"],
};
const CHAT_TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "select_file",
      description: "Ask the user to pick a file in the editor.",
      parameters: PICK_PARAMETERS,
    },
  },
];

type Body = Record<string, unknown>;
type Block = Record<string, unknown>;
const wireMessages = (body: Body | undefined) =>
  (body?.messages ?? []) as Array<{ role: string; content: string | Block[] }>;
const toolNames = (body: Body | undefined) =>
  ((body?.tools ?? []) as Array<{ name: string }>).map((tool) => tool.name);
/** The last tool_result block of an upstream body (the exec result the model reads), parsed. */
const lastToolResult = (body: Body) => {
  const blocks = wireMessages(body).flatMap((message) =>
    Array.isArray(message.content) ? message.content : [],
  );
  const result = blocks.filter((block) => block.type === "tool_result").at(-1);
  return JSON.parse(String(result?.content)) as Record<string, unknown>;
};
const PICK_CELL =
  'const picked = await tools.select_file({ pattern: "*.md" }); text("picked " + picked.path); return picked;';

/** The message of a Messages API error body, as the client got it. */
const messageOf = (error: InstanceType<typeof Anthropic.APIError>) =>
  String((error.error as { error?: { message?: unknown } } | undefined)?.error?.message);

function anthropicClient(gateway: HttpGateway, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({
    baseURL: gateway.url.replace(/\/$/, ""),
    apiKey: ALICE,
    maxRetries: 0,
    defaultHeaders: headers,
  });
}
function openaiClient(gateway: HttpGateway, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0, defaultHeaders: headers });
}

describe("the agent endpoint on a Messages API upstream", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;
  let off: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "messages" });
    const agent = {
      upstream: {
        api: "messages",
        baseUrl: upstream.baseUrl,
        apiKey: UPSTREAM_KEY,
        timeoutMs: 2500,
        maxTokens: 321,
      },
      maxModelTurns: 4,
    };
    const http = { tokens: [{ name: "alice", token: ALICE }] };
    [gateway, off] = await Promise.all([
      startHttpGateway(
        makeSetup(
          baseConfig({
            tools: { codeMode: { enabled: true, timeoutMs: 3000 }, deny: ["core:codecell:write_file"] },
            http,
            agent,
          }),
        ).configPath,
      ),
      startHttpGateway(
        makeSetup(baseConfig({ tools: { codeMode: false }, mcpServers: {}, http, agent })).configPath,
      ),
    ]);
  });
  afterAll(async () => {
    await gateway?.stop();
    await off?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
    upstream.headers.length = 0;
  });

  describe("a Messages client (@anthropic-ai/sdk)", () => {
    it("shows the model exactly exec and wait in Messages terms, with its key, version and system prompt", async () => {
      upstream.script(
        { toolCalls: [{ name: "exec", arguments: { code: "return ALL_TOOLS.map((tool) => tool.id)" } }] },
        (body) => ({
          text: `ids: ${JSON.stringify(lastToolResult(body).value)}`,
          usage: { prompt: 7, completion: 3 },
        }),
      );
      const answer = await anthropicClient(gateway).messages.create({
        model: "claude-test",
        max_tokens: 200,
        system: "You are terse.",
        messages: [{ role: "user", content: "what tools are there?" }],
        tools: MESSAGES_TOOLS,
      });
      expect(upstream.bodies).toHaveLength(2);
      const [first] = upstream.bodies;
      expect(toolNames(first)).toEqual(["exec", "wait"]);
      expect((first!.tools as Array<Record<string, unknown>>)[0]).toHaveProperty("input_schema");
      expect(first).toMatchObject({ model: "claude-test", max_tokens: 200, stream: false });
      expect(String(first!.system)).toContain("You are terse.");
      expect(upstream.headers[0]).toMatchObject({
        "x-api-key": UPSTREAM_KEY,
        "anthropic-version": "2023-06-01",
      });
      expect(upstream.headers[0]).not.toHaveProperty("authorization");
      // The hidden turn: the model's exec call as a tool_use block, the cell's result as a tool_result.
      const hidden = wireMessages(upstream.bodies[1]);
      expect(hidden.map((message) => message.role)).toEqual(["user", "assistant", "user"]);
      expect((hidden[1]!.content as Block[])[0]).toMatchObject({ type: "tool_use", name: "exec" });
      expect(lastToolResult(upstream.bodies[1]!).value).toContain("client:app:select_file");
      expect(answer.stop_reason).toBe("end_turn");
      expect(answer.content).toEqual([
        { type: "text", text: expect.stringContaining("client:app:select_file") },
      ]);
      // Summed over the two hidden calls: the scripted defaults (10 in, 5 out) and 7 in, 3 out.
      expect(answer.usage).toMatchObject({ input_tokens: 17, output_tokens: 8 });
    });

    it("hands a client tool back as tool_use, resumes on its tool_result, streaming both ways", async () => {
      const anthropic = anthropicClient(gateway);
      upstream.script(
        { text: "Let me ask.", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
        (body) => ({ text: `Cell said: ${JSON.stringify(lastToolResult(body))}` }),
      );
      const messages: MessageParam[] = [{ role: "user", content: "open the readme" }];
      const stream = anthropic.messages.stream({
        model: "m",
        max_tokens: 100,
        messages,
        tools: MESSAGES_TOOLS,
      });
      let streamed = "";
      stream.on("text", (text) => {
        streamed += text;
      });
      const first = await stream.finalMessage();
      expect(upstream.bodies[0]).toMatchObject({ stream: true });
      expect(streamed).toBe("Let me ask.");
      expect(first.stop_reason).toBe("tool_use");
      const use = first.content.find((block) => block.type === "tool_use");
      if (use?.type !== "tool_use") throw new Error("no tool_use block");
      expect(use).toMatchObject({ name: "select_file", input: { pattern: "*.md" } });

      messages.push(
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: use.id, content: '{"path":"README.md"}' }],
        },
      );
      const second = await anthropic.messages
        .stream({ model: "m", max_tokens: 100, messages, tools: MESSAGES_TOOLS })
        .finalMessage();
      expect(second.stop_reason).toBe("end_turn");
      const block = second.content[0]!;
      expect(block.type === "text" && block.text).toContain("picked README.md");
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
        status: "completed",
        value: { path: "README.md" },
      });
      // The model's own words before its exec call stay in the hidden transcript it sees again.
      const assistant = wireMessages(upstream.bodies[1]).find((message) => message.role === "assistant");
      expect(assistant?.content).toEqual([
        { type: "text", text: "Let me ask." },
        expect.objectContaining({ type: "tool_use", name: "exec" }),
      ]);
    });

    it("runs the gateway's tools and MCP servers in the cell, without the denied one, and records the trajectory", async () => {
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              id: "toolu_exec_mcp",
              arguments: {
                code: `
                  const ids = ALL_TOOLS.map((tool) => tool.id);
                  const graph = await MCP.memory.readGraph({});
                  return { ids, entities: Array.isArray(graph.structuredContent.entities) };`,
              },
            },
          ],
        },
        (body) => ({ text: JSON.stringify(lastToolResult(body).value) }),
      );
      const { data: answer, response } = await anthropicClient(gateway)
        .messages.create({
          model: "m",
          max_tokens: 100,
          messages: [{ role: "user", content: "look around" }],
          tools: MESSAGES_TOOLS,
        })
        .withResponse();
      const block = answer.content[0]!;
      const value = JSON.parse(block.type === "text" ? block.text : "null") as {
        ids: string[];
        entities: boolean;
      };
      expect(value.entities).toBe(true);
      expect(value.ids).toEqual(
        expect.arrayContaining([
          "client:app:select_file",
          "core:codecell:read_file",
          "plugin:notes:notes_add",
        ]),
      );
      expect(value.ids).not.toContain("core:codecell:write_file");
      const thread = response.headers.get("codecell-thread");
      const { entries } = (await (
        await fetch(`${gateway.url}v1/codecell/threads/${thread}/trajectory`, {
          headers: { authorization: `Bearer ${ALICE}` },
        })
      ).json()) as { entries: Array<Record<string, unknown>> };
      expect(entries.find((entry) => entry.kind === "control" && entry.tool === "exec")).toMatchObject({
        toolCallId: "toolu_exec_mcp",
        status: "completed",
      });
      expect(entries.find((entry) => entry.kind === "nested")).toMatchObject({
        tool: "mcp:memory:read_graph",
        parentToolCallId: "toolu_exec_mcp",
      });
    });

    it("passes a request through byte for byte with code mode off, and its answer back unchanged", async () => {
      upstream.script({
        toolCalls: [{ name: "select_file", arguments: { pattern: "*.md" }, id: "toolu_1" }],
      });
      const request = {
        model: "m",
        max_tokens: 64,
        messages: [{ role: "user" as const, content: "pick a file" }],
        tools: MESSAGES_TOOLS,
        thinking: { type: "enabled" as const, budget_tokens: 1024 },
        top_k: 5,
      };
      const answer = await anthropicClient(off).messages.create(request);
      expect(upstream.bodies).toEqual([request]);
      expect(answer.id).toBe("msg_up_1");
      expect(answer.content).toEqual([
        { type: "tool_use", id: "toolu_1", name: "select_file", input: { pattern: "*.md" } },
      ]);
    });

    it("refuses what code mode cannot keep, and relays the upstream's errors in Messages terms", async () => {
      const anthropic = anthropicClient(gateway);
      const base = {
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user" as const, content: "hi" }],
        tools: MESSAGES_TOOLS,
      };
      const servers = await rejectionOf(
        anthropic.messages.create({
          ...base,
          ...({ mcp_servers: [{ type: "url", url: "https://x", name: "x" }] } as object),
        }),
        Anthropic.BadRequestError,
      );
      expect(messageOf(servers)).toContain("mcp_servers");
      expect(upstream.bodies).toHaveLength(0);

      upstream.script({
        status: 400,
        body: { type: "error", error: { type: "invalid_request_error", message: "model: unknown model m" } },
      });
      const bad = await rejectionOf(anthropic.messages.create(base), Anthropic.BadRequestError);
      expect(messageOf(bad)).toContain("unknown model m");
      upstream.script({
        status: 529,
        body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
      });
      const overloaded = await rejectionOf(anthropic.messages.create(base), Anthropic.APIError);
      expect(overloaded.status).toBe(502);
      expect(messageOf(overloaded)).toContain("Overloaded");
      upstream.script({ raw: "<html>proxy error</html>", contentType: "text/html" });
      const malformed = await rejectionOf(anthropic.messages.create(base), Anthropic.APIError);
      expect(malformed.status).toBe(502);
      expect(messageOf(malformed)).toContain("not a Messages API answer");
    });
  });

  describe("a Chat Completions client (openai)", () => {
    it("hands a client tool back as tool_calls and resumes, with its parameters and system prompt mapped", async () => {
      const openai = openaiClient(gateway);
      upstream.script(
        {
          toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }],
          usage: { prompt: 4, completion: 2 },
        },
        (body) => ({
          text: `Cell said: ${JSON.stringify(lastToolResult(body))}`,
          usage: { prompt: 6, completion: 1 },
        }),
      );
      const messages: ChatCompletionMessageParam[] = [
        { role: "system", content: "Be brief." },
        { role: "user", content: "open the readme" },
      ];
      const first = await openai.chat.completions.create({
        model: "m",
        messages,
        tools: CHAT_TOOLS,
        max_completion_tokens: 77,
        temperature: 0.5,
        stop: "END",
        user: "user-42",
      });
      expect(upstream.bodies[0]).toMatchObject({
        max_tokens: 77,
        temperature: 0.5,
        stop_sequences: ["END"],
        metadata: { user_id: "user-42" },
      });
      expect(upstream.bodies[0]).not.toHaveProperty("max_completion_tokens");
      expect(String(upstream.bodies[0]!.system)).toContain("Be brief.");
      expect(wireMessages(upstream.bodies[0]).map((message) => message.role)).toEqual(["user"]);
      expect(toolNames(upstream.bodies[0])).toEqual(["exec", "wait"]);
      const choice = first.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      const call = choice.message.tool_calls?.[0];
      if (call?.type !== "function") throw new Error("no function tool call");
      expect(call.function).toEqual({ name: "select_file", arguments: '{"pattern":"*.md"}' });

      messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: '{"path":"README.md"}' });
      const second = await openai.chat.completions.create({
        model: "m",
        messages,
        tools: CHAT_TOOLS,
        max_tokens: 77,
      });
      expect(second.choices[0]!.finish_reason).toBe("stop");
      expect(second.choices[0]!.message.content).toContain("picked README.md");
      expect(second.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 1 });
    });

    it("streams through the openai client's helpers, with the summed usage when asked", async () => {
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: "return 6 * 7" } }] }, (body) => ({
        text: `The answer is ${lastToolResult(body).value}.`,
      }));
      const stream = openaiClient(gateway).chat.completions.stream({
        model: "m",
        messages: [{ role: "user", content: "compute" }],
        tools: CHAT_TOOLS,
        stream_options: { include_usage: true },
      });
      let streamed = "";
      stream.on("content", (delta) => {
        streamed += delta;
      });
      const completion = await stream.finalChatCompletion();
      expect(upstream.bodies.every((body) => body.stream === true)).toBe(true);
      expect(streamed).toBe("The answer is 42.");
      expect(completion.choices[0]!.message.content).toBe("The answer is 42.");
      expect(completion.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 });
    });

    it("with code mode off, translates the client's tools, image and tool choice, streamed or not", async () => {
      const openai = openaiClient(off);
      upstream.script({
        toolCalls: [{ name: "select_file", arguments: { pattern: "*.png" }, id: "toolu_9" }],
      });
      const answer = await openai.chat.completions.create({
        model: "m",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "which file is this?" },
              { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
            ],
          },
        ],
        tools: CHAT_TOOLS,
        tool_choice: "required",
        parallel_tool_calls: false,
      });
      const [sent] = upstream.bodies;
      expect(sent).toMatchObject({
        max_tokens: 321,
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        tools: [{ name: "select_file", input_schema: PICK_PARAMETERS }],
      });
      expect(wireMessages(sent)[0]!.content).toEqual([
        { type: "text", text: "which file is this?" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
      ]);
      expect(answer.choices[0]!.finish_reason).toBe("tool_calls");
      expect(answer.choices[0]!.message.tool_calls?.[0]).toMatchObject({
        id: "toolu_9",
        function: { name: "select_file", arguments: '{"pattern":"*.png"}' },
      });

      upstream.script({ text: "a tiny png" });
      let streamed = "";
      const stream = openai.chat.completions.stream({
        model: "m",
        messages: [{ role: "user", content: "describe" }],
        tools: CHAT_TOOLS,
        tool_choice: "none",
      });
      stream.on("content", (delta) => {
        streamed += delta;
      });
      const final = await stream.finalChatCompletion();
      expect(streamed).toBe("a tiny png");
      expect(final.choices[0]!.message.content).toBe("a tiny png");
      expect(upstream.bodies[1]).toMatchObject({ stream: true, tool_choice: { type: "none" } });
    });

    it("refuses parameters the Messages API has no counterpart for, before anything goes upstream", async () => {
      const openai = openaiClient(gateway);
      const base = { model: "m", messages: [{ role: "user" as const, content: "hi" }], tools: CHAT_TOOLS };
      for (const extra of [
        { seed: 7 },
        { response_format: { type: "json_object" as const } },
        { logprobs: true },
      ]) {
        const error = await rejectionOf(
          openai.chat.completions.create({ ...base, ...extra }),
          OpenAI.BadRequestError,
        );
        expect(error.message).toContain(`"${Object.keys(extra)[0]}" has no counterpart in the Messages API`);
      }
      const audio = await rejectionOf(
        openaiClient(off).chat.completions.create({
          model: "m",
          messages: [
            {
              role: "user",
              content: [{ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }],
            },
          ],
        }),
        OpenAI.BadRequestError,
      );
      expect(audio.message).toContain('"input_audio" content part cannot be sent');
      expect(upstream.bodies).toHaveLength(0);

      upstream.script({
        status: 401,
        body: { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } },
      });
      const denied = await rejectionOf(openai.chat.completions.create(base), OpenAI.AuthenticationError);
      expect(denied.message).toContain("invalid x-api-key");
    });
  });
});
