import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type { FunctionTool } from "openai/resources/responses/responses";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { lastToolResult, rejectionOf, upstreamMessages } from "./support/agent-endpoint.js";

// What a client sends back for the calls handed out to it, on each front with its official client:
// a failure as its API carries it is a catchable error in the cell with the client's own message, and
// a request that answers a hand-out with no result at all is told what to send, and its run is ended.

const ALICE = "agent-alice-token-0123456789";
const PARAMETERS = {
  type: "object" as const,
  properties: { pattern: { type: "string" } },
  required: ["pattern"],
};
const CHAT_TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: { name: "select_file", description: "Pick a file.", parameters: PARAMETERS },
  },
];
const MESSAGES_TOOLS: Tool[] = [
  { name: "select_file", description: "Pick a file.", input_schema: PARAMETERS },
];
const RESPONSES_TOOLS: FunctionTool[] = [
  {
    type: "function",
    name: "select_file",
    description: "Pick a file.",
    parameters: PARAMETERS,
    strict: false,
  },
];
const FAILURE = "outside the workspace";
/** Catches the client's failure and shows the cell what it got. */
const CATCHING_CELL = `
  try {
    await tools.select_file({ pattern: "*.md" });
    return "no error";
  } catch (error) {
    return { message: error.message, shown: String(error) };
  }`;
const PICK_CELL = 'const picked = await tools.select_file({ pattern: "*.md" }); return picked;';

describe("the agent endpoint: what clients send back for handed-out calls", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
          mcpServers: {},
          http: { tokens: [{ name: "alice", token: ALICE }] },
          agent: { upstream: { baseUrl: upstream.baseUrl, apiKey: "k", timeoutMs: 2500 }, maxModelTurns: 4 },
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
  });

  const openai = () => new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
  const anthropic = () =>
    new Anthropic({ baseURL: gateway.url.replace(/\/$/, ""), apiKey: ALICE, maxRetries: 0 });
  /** The model runs `cell`, then answers with the cell's result as JSON. */
  const scriptCell = (cell: string) =>
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: cell } }] }, (body) => ({
      text: JSON.stringify(lastToolResult(body).value ?? null),
    }));

  /** The cell caught the client's failure with the client's message, said once. */
  const expectCaught = (answer: string) => {
    const caught = JSON.parse(answer) as { message: string; shown: string };
    expect(caught.message).toBe(FAILURE);
    expect(caught.shown).toBe(`Error: ${FAILURE}`);
  };

  describe("a tool failure is a catchable error with the client's message once", () => {
    it('Chat Completions: a tool message of {"error": ...}', async () => {
      scriptCell(CATCHING_CELL);
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "pick" }];
      const first = await openai().chat.completions.create({ model: "m", messages, tools: CHAT_TOOLS });
      const message = first.choices[0]!.message;
      messages.push(message, {
        role: "tool",
        tool_call_id: message.tool_calls![0]!.id,
        content: JSON.stringify({ error: FAILURE }),
      });
      const second = await openai().chat.completions.create({ model: "m", messages, tools: CHAT_TOOLS });
      expectCaught(second.choices[0]!.message.content!);
    });

    it("Messages: a tool_result with is_error", async () => {
      scriptCell(CATCHING_CELL);
      const messages: MessageParam[] = [{ role: "user", content: "pick" }];
      const first = await anthropic().messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: MESSAGES_TOOLS,
      });
      const use = first.content.find((block) => block.type === "tool_use")!;
      messages.push(
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              tool_use_id: use.type === "tool_use" ? use.id : "",
              content: FAILURE,
              is_error: true,
            },
          ],
        },
      );
      const second = await anthropic().messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: MESSAGES_TOOLS,
      });
      const block = second.content[0]!;
      expectCaught(block.type === "text" ? block.text : "");
    });

    it('Responses: a function_call_output of {"error": ...}', async () => {
      scriptCell(CATCHING_CELL);
      const first = await openai().responses.create({ model: "m", input: "pick", tools: RESPONSES_TOOLS });
      const call = first.output.find((item) => item.type === "function_call")!;
      const second = await openai().responses.create({
        model: "m",
        previous_response_id: first.id,
        input: [
          {
            type: "function_call_output",
            call_id: call.type === "function_call" ? call.call_id : "",
            output: JSON.stringify({ error: FAILURE }),
          },
        ],
        tools: RESPONSES_TOOLS,
      });
      expectCaught(second.output_text);
    });
  });

  describe("a request that answers a hand-out with no result is told what to send, and its run is ended", () => {
    /** The model's hidden exec call got the note that its cell was ended; no new cell ran. */
    const expectEnded = () => {
      expect(upstream.bodies).toHaveLength(2);
      const ended = lastToolResult(upstream.bodies[1]!);
      expect(ended).toMatchObject({ status: "aborted" });
      expect(String(ended.error)).toContain("select_file");
      expect(upstreamMessages(upstream.bodies[1]).at(-1)).toMatchObject({
        role: "user",
        content: "never mind",
      });
    };

    it("Chat Completions", async () => {
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, { text: "Fine." });
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "pick" }];
      const first = await openai().chat.completions.create({ model: "m", messages, tools: CHAT_TOOLS });
      messages.push(first.choices[0]!.message, { role: "user", content: "never mind" });
      const refused = await rejectionOf(
        openai().chat.completions.create({ model: "m", messages, tools: CHAT_TOOLS }),
        OpenAI.APIError,
      );
      expect(refused.status).toBe(400);
      expect(refused.message).toContain('send a "tool" message with its result');
      expect(refused.message).toContain("has been ended");
      // The run is over, not waiting for its TTL: the same request goes on without a fresh cell.
      const again = await openai().chat.completions.create({ model: "m", messages, tools: CHAT_TOOLS });
      expect(again.choices[0]!.message.content).toBe("Fine.");
      expectEnded();
    });

    it("Messages", async () => {
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, { text: "Fine." });
      const messages: MessageParam[] = [{ role: "user", content: "pick" }];
      const create = () =>
        anthropic().messages.create({ model: "m", max_tokens: 100, messages, tools: MESSAGES_TOOLS });
      const first = await create();
      messages.push({ role: "assistant", content: first.content }, { role: "user", content: "never mind" });
      const refused = await rejectionOf(create(), Anthropic.APIError);
      expect(refused.status).toBe(400);
      expect(refused.message).toContain("send a tool_result block with its result");
      expect(refused.message).toContain("has been ended");
      const again = await create();
      expect(again.content[0]).toMatchObject({ type: "text", text: "Fine." });
      expectEnded();
    });

    it("Responses", async () => {
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, { text: "Fine." });
      const first = await openai().responses.create({ model: "m", input: "pick", tools: RESPONSES_TOOLS });
      const followUp = () =>
        openai().responses.create({
          model: "m",
          previous_response_id: first.id,
          input: "never mind",
          tools: RESPONSES_TOOLS,
        });
      const refused = await rejectionOf(followUp(), OpenAI.APIError);
      expect(refused.status).toBe(400);
      expect(refused.message).toContain("send a function_call_output item with its result");
      expect(refused.message).toContain("has been ended");
      const again = await followUp();
      expect(again.output_text).toBe("Fine.");
      expectEnded();
    });
  });
});
