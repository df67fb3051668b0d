import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import type { Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { rejectionOf } from "./support/agent-endpoint.js";

// A Messages client with extended thinking on a Messages upstream in code mode: the model's thinking
// blocks, signatures and all, stay in the hidden turns beside the exec calls they led to, across a
// hand-out of a client tool and its resume. And the Anthropic SDK's server-held message threads
// (toolRunner's default): refused with the error the SDK answers by sending the whole conversation.

const TOKEN = "thinking-token-0123456789";

type Body = Record<string, unknown>;
type Block = Record<string, unknown>;
const wireMessages = (body: Body | undefined) =>
  (body?.messages ?? []) as Array<{ role: string; content: string | Block[] }>;

const PICK_TOOLS: Tool[] = [
  {
    name: "select_file",
    description: "Ask the user to pick a file in the editor.",
    input_schema: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
  },
];

describe("thinking and message threads through code mode on a Messages upstream", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;
  let client: Anthropic;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "messages" });
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 5000 } },
          http: { tokens: [{ name: "alice", token: TOKEN }] },
          agent: { upstream: { api: "messages", baseUrl: upstream.baseUrl, apiKey: "k", timeoutMs: 5000 } },
        }),
      ).configPath,
    );
    client = new Anthropic({ baseURL: gateway.url.replace(/\/$/, ""), apiKey: TOKEN, maxRetries: 0 });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
  });

  it.each([
    { thinking: { type: "enabled", budget_tokens: 1024 } as const, stream: false },
    { thinking: { type: "adaptive" } as const, stream: true },
  ])(
    "keeps $thinking.type thinking with its exec calls across a hand-out and resume (stream: $stream)",
    async ({ thinking, stream }) => {
      upstream.script(
        {
          reasoning: "sig-first",
          toolCalls: [
            {
              name: "exec",
              id: "toolu_exec_1",
              arguments: {
                code: 'const picked = await tools.select_file({ pattern: "*.md" }); return picked;',
              },
            },
          ],
        },
        {
          reasoning: "sig-second",
          toolCalls: [{ name: "exec", id: "toolu_exec_2", arguments: { code: "return 2" } }],
        },
        { text: "Picked README.md." },
      );
      const base = {
        model: "m",
        max_tokens: 2048,
        thinking,
        tools: PICK_TOOLS,
        messages: [{ role: "user" as const, content: "pick a markdown file" }],
      };
      const first = stream
        ? await client.messages.stream(base).finalMessage()
        : await client.messages.create(base);
      expect(first.stop_reason).toBe("tool_use");
      // The hidden turn's thinking is the model's own: the client sees the tool call only.
      expect(first.content.map((block) => block.type)).toEqual(["tool_use"]);
      const use = first.content[0] as Anthropic.ToolUseBlock;
      const resumed = {
        ...base,
        messages: [
          ...base.messages,
          { role: "assistant" as const, content: first.content },
          {
            role: "user" as const,
            content: [{ type: "tool_result" as const, tool_use_id: use.id, content: '{"path":"README.md"}' }],
          },
        ],
      };
      const second = stream
        ? await client.messages.stream(resumed).finalMessage()
        : await client.messages.create(resumed);
      expect(second.content).toEqual([{ type: "text", text: "Picked README.md." }]);

      expect(upstream.bodies).toHaveLength(3);
      for (const body of upstream.bodies) expect(body.thinking).toEqual(thinking);
      // Each hidden assistant turn goes back led by its thinking block, signature as the model gave it.
      const [, afterFirst, afterSecond] = upstream.bodies;
      const assistantTurns = (body: Body | undefined) =>
        wireMessages(body)
          .filter((message) => message.role === "assistant")
          .map((message) =>
            (message.content as Block[]).map((block) => [block.type, block.signature ?? block.id]),
          );
      expect(assistantTurns(afterFirst)).toEqual([
        [
          ["thinking", "sig-first"],
          ["tool_use", "toolu_exec_1"],
        ],
      ]);
      expect(assistantTurns(afterSecond)).toEqual([
        [
          ["thinking", "sig-first"],
          ["tool_use", "toolu_exec_1"],
        ],
        [
          ["thinking", "sig-second"],
          ["tool_use", "toolu_exec_2"],
        ],
      ]);
      const thinkingBlock = (wireMessages(afterSecond)[1]!.content as Block[])[0];
      // The block as the model wrote it: its text and signature, nothing added.
      expect(thinkingBlock).toEqual({
        type: "thinking",
        thinking: expect.stringMatching(/^Thinking before /),
        signature: "sig-first",
      });
    },
  );

  it("passes a mid-conversation system message to the upstream where the client put it", async () => {
    upstream.script({ text: "ok" });
    await client.messages.create({
      model: "m",
      max_tokens: 64,
      tools: PICK_TOOLS,
      system: "You help.",
      messages: [
        { role: "user", content: "hi" },
        {
          role: "system",
          content: [{ type: "text", text: "The folder is /work.", cache_control: { type: "ephemeral" } }],
        },
      ] as Anthropic.MessageParam[],
    });
    const body = upstream.bodies[0]!;
    expect(body.system).toContain("You help.");
    expect(wireMessages(body).map((message) => message.role)).toEqual(["user", "system"]);
    expect(wireMessages(body)[1]!.content).toEqual([{ type: "text", text: "The folder is /work." }]);
  });

  it("refuses a server-held thread with the error the SDK answers by resending, so toolRunner works with its defaults", async () => {
    const sent: Body[] = [];
    const recording = new Anthropic({
      baseURL: gateway.url.replace(/\/$/, ""),
      apiKey: TOKEN,
      maxRetries: 0,
      fetch: async (url, init) => {
        sent.push(JSON.parse(String(init?.body)) as Body);
        return fetch(url, init);
      },
    });
    const asked: string[] = [];
    const lookup = betaTool({
      name: "lookup_price",
      description: "The price of an item.",
      inputSchema: { type: "object", properties: { item: { type: "string" } }, required: ["item"] },
      run: async ({ item }) => {
        asked.push(item);
        return "4.2";
      },
    });
    upstream.script(
      {
        toolCalls: [
          {
            name: "exec",
            arguments: { code: 'const price = await tools.lookup_price({ item: "tea" }); return { price };' },
          },
        ],
      },
      (body) => {
        const results = wireMessages(body).flatMap((message) =>
          Array.isArray(message.content)
            ? message.content.filter((block) => block.type === "tool_result")
            : [],
        );
        const result = String(results.at(-1)?.content);
        return { text: result.includes('"price":4.2') ? "Tea costs 4.2." : `No price in ${result}` };
      },
    );
    const final = await recording.beta.messages.toolRunner({
      model: "m",
      max_tokens: 256,
      messages: [{ role: "user", content: "What does tea cost?" }],
      tools: [lookup],
    });
    expect(final.content).toEqual([{ type: "text", text: "Tea costs 4.2." }]);
    expect(asked).toEqual(["tea"]);
    // The SDK asked for a thread first, was refused before anything ran, and sent the whole
    // conversation from then on; nothing of the thread reached the model.
    expect(sent[0]?.thread).toEqual({ type: "create" });
    expect(sent.slice(1).every((body) => body.thread === undefined)).toBe(true);
    expect(sent.length).toBe(3);
    expect(upstream.bodies).toHaveLength(2);
    for (const body of upstream.bodies) expect(body.thread).toBeUndefined();
  });

  it("refuses a thread's continuation too, before a tool result can reach the suspended run", async () => {
    upstream.script({
      toolCalls: [{ name: "exec", arguments: { code: 'return await tools.select_file({ pattern: "*" });' } }],
    });
    const base = { model: "m", max_tokens: 64, tools: PICK_TOOLS };
    const first = await client.messages.create({ ...base, messages: [{ role: "user", content: "pick" }] });
    const use = first.content.find((block) => block.type === "tool_use") as Anthropic.ToolUseBlock;
    const refused = await rejectionOf(
      client.messages.create({
        ...base,
        messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "{}" }] }],
        ...({ thread: { type: "continue", previous_message_id: first.id } } as object),
      }),
      Anthropic.BadRequestError,
    );
    expect(refused.error).toMatchObject({
      error: { type: "invalid_request_error", details: { error_code: "thread_unsupported_request" } },
    });
    expect(upstream.bodies).toHaveLength(1);
  });
});
