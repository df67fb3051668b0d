import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam } from "@anthropic-ai/sdk/resources/messages";
import { FINISH_REASONS, type FinishReason, type WireApi } from "@codecell/agent";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { lastToolResult, rejectionOf } from "./support/agent-endpoint.js";

// What an answer says is what happened, on both fronts (the openai and @anthropic-ai/sdk clients), on
// both upstream kinds, streamed or not: the finish reason (from the table in @codecell/agent), the
// thread header, the text of an upstream that answers a stream with one JSON body, what a cell wrote
// before it handed a call out, the upstream's Retry-After, and errors in the client's own API's words.

const TOKEN = "agent-answers-token-0123456789";
const APIS: readonly WireApi[] = ["chat-completions", "messages"];
const TOOL = {
  name: "lookup_order",
  description: "Look an order up in the app's database.",
  schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
};

/** One answer as a client read it, whichever API it speaks. */
type Reply = {
  text: string;
  finish: string | null;
  calls: Array<{ id: string; name: string; input: unknown }>;
  /** The codecell-thread header of the response. */
  thread: string | null;
};

/** A conversation as one client keeps it: its messages, the answers appended as they come. */
interface Conversation {
  ask(stream: boolean, tools?: boolean): Promise<Reply>;
  /** The results of the last answer's calls, and optionally the user's words after them. */
  answer(results: Record<string, unknown>, text?: string): void;
}

function chatConversation(gateway: HttpGateway, first: string): Conversation {
  const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: TOKEN, maxRetries: 0 });
  const messages: ChatCompletionMessageParam[] = [{ role: "user", content: first }];
  const tools = [
    {
      type: "function" as const,
      function: { name: TOOL.name, description: TOOL.description, parameters: TOOL.schema },
    },
  ];
  return {
    async ask(stream, withTools = true) {
      const params = { model: "m", messages, ...(withTools ? { tools } : {}) };
      let reply: Reply;
      if (!stream) {
        const { data, response } = await openai.chat.completions.create(params).withResponse();
        const choice = data.choices[0]!;
        reply = {
          text: choice.message.content ?? "",
          finish: choice.finish_reason,
          calls: (choice.message.tool_calls ?? []).map((call) => {
            if (call.type !== "function") throw new Error("not a function call");
            return { id: call.id, name: call.function.name, input: JSON.parse(call.function.arguments) };
          }),
          thread: response.headers.get("codecell-thread"),
        };
      } else {
        const { data, response } = await openai.chat.completions
          .create({ ...params, stream: true })
          .withResponse();
        reply = { text: "", finish: null, calls: [], thread: response.headers.get("codecell-thread") };
        const args: string[] = [];
        for await (const chunk of data) {
          const choice = chunk.choices[0];
          if (!choice) continue;
          reply.text += choice.delta.content ?? "";
          for (const call of choice.delta.tool_calls ?? []) {
            if (call.id)
              reply.calls[call.index] = { id: call.id, name: call.function?.name ?? "", input: null };
            args[call.index] = (args[call.index] ?? "") + (call.function?.arguments ?? "");
          }
          if (choice.finish_reason) reply.finish = choice.finish_reason;
        }
        reply.calls.forEach((call, index) => {
          call.input = JSON.parse(args[index] ?? "{}");
        });
      }
      messages.push({
        role: "assistant",
        content: reply.text || null,
        ...(reply.calls.length
          ? {
              tool_calls: reply.calls.map((call) => ({
                id: call.id,
                type: "function" as const,
                function: { name: call.name, arguments: JSON.stringify(call.input) },
              })),
            }
          : {}),
      });
      return reply;
    },
    answer(results, text) {
      for (const [id, value] of Object.entries(results)) {
        messages.push({ role: "tool", tool_call_id: id, content: JSON.stringify(value) });
      }
      if (text !== undefined) messages.push({ role: "user", content: text });
    },
  };
}

function messagesConversation(gateway: HttpGateway, first: string): Conversation {
  const anthropic = new Anthropic({ baseURL: gateway.url.replace(/\/$/, ""), apiKey: TOKEN, maxRetries: 0 });
  const messages: MessageParam[] = [{ role: "user", content: first }];
  const tools = [{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.schema as never }];
  return {
    async ask(stream, withTools = true) {
      const params = { model: "m", max_tokens: 200, messages, ...(withTools ? { tools } : {}) };
      let reply: Reply;
      if (!stream) {
        const { data, response } = await anthropic.messages.create(params).withResponse();
        reply = {
          text: data.content.map((block) => (block.type === "text" ? block.text : "")).join(""),
          finish: data.stop_reason,
          calls: data.content.flatMap((block) =>
            block.type === "tool_use" ? [{ id: block.id, name: block.name, input: block.input }] : [],
          ),
          thread: response.headers.get("codecell-thread"),
        };
      } else {
        const { data, response } = await anthropic.messages
          .create({ ...params, stream: true })
          .withResponse();
        reply = { text: "", finish: null, calls: [], thread: response.headers.get("codecell-thread") };
        const json = new Map<number, string>();
        for await (const event of data) {
          if (event.type === "content_block_start" && event.content_block.type === "tool_use") {
            const block = event.content_block;
            reply.calls.push({ id: block.id, name: block.name, input: null });
            json.set(event.index, "");
          } else if (event.type === "content_block_delta") {
            if (event.delta.type === "text_delta") reply.text += event.delta.text;
            if (event.delta.type === "input_json_delta")
              json.set(event.index, (json.get(event.index) ?? "") + event.delta.partial_json);
          } else if (event.type === "message_delta") reply.finish = event.delta.stop_reason;
        }
        [...json.values()].forEach((text, index) => {
          reply.calls[index]!.input = JSON.parse(text || "{}");
        });
      }
      messages.push({
        role: "assistant",
        content: [
          ...(reply.text ? [{ type: "text" as const, text: reply.text }] : []),
          ...reply.calls.map((call) => ({
            type: "tool_use" as const,
            id: call.id,
            name: call.name,
            input: call.input,
          })),
        ],
      });
      return reply;
    },
    answer(results, text) {
      messages.push({
        role: "user",
        content: [
          ...Object.entries(results).map(([id, value]) => ({
            type: "tool_result" as const,
            tool_use_id: id,
            content: JSON.stringify(value),
          })),
          ...(text !== undefined ? [{ type: "text" as const, text }] : []),
        ],
      });
    },
  };
}

const conversation = (front: WireApi, gateway: HttpGateway, first: string): Conversation =>
  front === "chat-completions" ? chatConversation(gateway, first) : messagesConversation(gateway, first);

/** The upstream's words as the table reads them: the first row that lists a word is its reason. */
function readAs(api: WireApi, word: string): FinishReason {
  const rows = Object.entries(FINISH_REASONS) as Array<[FinishReason, Record<WireApi, readonly string[]>]>;
  return rows.find(([, words]) => words[api].includes(word))![0];
}

/** Every word an upstream of `api` may end an answer with (the client's own tool calls aside). */
const answerWords = (api: WireApi) => [
  ...new Set(
    (Object.keys(FINISH_REASONS) as FinishReason[])
      .filter((reason) => reason !== "tool_calls")
      .flatMap((reason) => FINISH_REASONS[reason][api]),
  ),
];

/** The text of an upstream body's messages, in order, whichever API it is written in. */
const upstreamText = (body: Record<string, unknown> | undefined) => JSON.stringify(body?.messages ?? []);

describe("what the agent endpoint's answers say", () => {
  const upstreams = new Map<WireApi, ScriptedUpstream>();
  const gateways = new Map<WireApi, HttpGateway>();
  let off: HttpGateway;

  beforeAll(async () => {
    for (const api of APIS) upstreams.set(api, await startScriptedUpstream({ api }));
    const http = { tokens: [{ name: "alice", token: TOKEN }] };
    const started = await Promise.all([
      ...APIS.map((api) =>
        startHttpGateway(
          makeSetup(
            baseConfig({
              tools: { codeMode: { enabled: true, timeoutMs: 5000 }, approval: ["core:*:write_file"] },
              mcpServers: {},
              http,
              agent: { upstream: { api, baseUrl: upstreams.get(api)!.baseUrl, timeoutMs: 30_000 } },
            }),
          ).configPath,
        ),
      ),
      // No agent section: the endpoint is off.
      startHttpGateway(makeSetup(baseConfig({ mcpServers: {}, http })).configPath),
    ]);
    for (const [index, api] of APIS.entries()) gateways.set(api, started[index]!);
    off = started[APIS.length]!;
  });
  afterAll(async () => {
    await Promise.all([...gateways.values(), off].map((gateway) => gateway?.stop()));
    for (const upstream of upstreams.values()) await upstream.close();
  });
  beforeEach(() => {
    for (const upstream of upstreams.values()) upstream.bodies.length = 0;
  });

  for (const upstreamApi of APIS) {
    for (const front of APIS) {
      for (const stream of [false, true]) {
        const where = `${front} front, ${upstreamApi} upstream, ${stream ? "streamed" : "not streamed"}`;

        it(`gives the upstream's finish reason its true counterpart (${where})`, async () => {
          const upstream = upstreams.get(upstreamApi)!;
          const gateway = gateways.get(upstreamApi)!;
          for (const word of answerWords(upstreamApi)) {
            const expected = FINISH_REASONS[readAs(upstreamApi, word)][front][0];
            // In code mode after a cell ran, and passed through (translated when the APIs differ).
            upstream.script(
              { toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] },
              { text: `Ended by ${word}.`, finish: word },
            );
            const driven = await conversation(front, gateway, `finish ${word} ${where}`).ask(stream);
            expect({ word, text: driven.text, finish: driven.finish }).toEqual({
              word,
              text: `Ended by ${word}.`,
              finish: expected,
            });
            if (front === upstreamApi) continue; // passed through byte for byte: the word itself
            upstream.script({ text: `Passed ${word}.`, finish: word });
            const passed = await conversation(front, gateway, `pass ${word} ${where}`).ask(stream, false);
            expect({ word, finish: passed.finish }).toEqual({ word, finish: expected });
          }
        });

        it(`hands client calls out as tool calls, and the model gets what the cell wrote before and after (${where})`, async () => {
          const upstream = upstreams.get(upstreamApi)!;
          const gateway = gateways.get(upstreamApi)!;
          upstream.script(
            {
              toolCalls: [
                {
                  name: "exec",
                  arguments: {
                    code: 'text("start"); const order = await tools.lookup_order({ id: "A-7" }); text("after"); return order.total;',
                  },
                },
              ],
            },
            (body) => ({ text: `Cell said ${JSON.stringify(lastResult(upstreamApi, body))}` }),
          );
          const chat = conversation(front, gateway, `hand out ${where}`);
          const first = await chat.ask(stream);
          expect(first.finish).toBe(FINISH_REASONS.tool_calls[front][0]);
          expect(first.calls).toEqual([
            { id: expect.any(String), name: "lookup_order", input: { id: "A-7" } },
          ]);
          expect(first.thread).toMatch(/^thread_/);
          chat.answer({ [first.calls[0]!.id]: { total: 21 } });
          const second = await chat.ask(stream);
          expect(second.thread).toBe(first.thread);
          const result = lastResult(upstreamApi, upstream.bodies[1]!);
          expect(result).toMatchObject({
            status: "completed",
            value: 21,
            output: [
              { type: "text", text: "start" },
              { type: "text", text: "after" },
            ],
          });
          // The thread's trajectory: the handed-out call was answered, it no longer waits.
          const trajectory = (await (
            await fetch(`${gateway.url}v1/codecell/threads/${first.thread}/trajectory`, {
              headers: { authorization: `Bearer ${TOKEN}` },
            })
          ).json()) as { entries: Array<{ tool: string; status: string }> };
          const calls = trajectory.entries.filter((entry) => entry.tool === "client:app:lookup_order");
          expect(calls.map((entry) => entry.status)).toEqual(["completed"]);
        });

        it(`sends the thread header before the first streamed byte, and the text of a whole answer to a stream (${where})`, async () => {
          const upstream = upstreams.get(upstreamApi)!;
          const gateway = gateways.get(upstreamApi)!;
          // The model's text streams before the answer ends (the header cannot wait for the end).
          upstream.script(
            { text: "Looking.", toolCalls: [{ name: "exec", arguments: { code: "return 2" } }] },
            { text: "The answer is 2." },
          );
          const reply = await conversation(front, gateway, `headers ${where}`).ask(stream);
          expect(reply.text).toBe("Looking.\n\nThe answer is 2.");
          expect(reply.thread).toMatch(/^thread_/);
          // An upstream that answers `stream: true` with one JSON body: its text still reaches the client.
          upstream.script(
            { toolCalls: [{ name: "exec", arguments: { code: "return 3" } }], whole: true },
            { text: "Whole answer.", whole: true },
          );
          const whole = await conversation(front, gateway, `whole ${where}`).ask(stream);
          expect(whole).toMatchObject({ text: "Whole answer.", finish: FINISH_REASONS.stop[front][0] });
          if (front !== upstreamApi) {
            upstream.script({ text: "Whole, passed.", whole: true });
            const passed = await conversation(front, gateway, `whole pass ${where}`).ask(stream, false);
            expect(passed.text).toBe("Whole, passed.");
          }
        });

        it(`passes an upstream 429's Retry-After on and does not blame the model name (${where})`, async () => {
          const upstream = upstreams.get(upstreamApi)!;
          const gateway = gateways.get(upstreamApi)!;
          for (const tools of [true, false]) {
            upstream.script({
              status: 429,
              body: { error: { type: "rate_limit_error", message: "slow down" } },
              headers: { "retry-after": "7" },
            });
            const asked = conversation(front, gateway, `limited ${tools} ${where}`).ask(stream, tools);
            const error =
              front === "chat-completions"
                ? await rejectionOf(asked, OpenAI.APIError)
                : await rejectionOf(asked, Anthropic.APIError);
            expect(error.status).toBe(429);
            // Both clients keep the response headers as a fetch Headers object.
            expect((error.headers as Headers | undefined)?.get("retry-after")).toBe("7");
            expect(error.message).toContain("slow down");
            expect(error.message).not.toContain("model name");
          }
        });
      }
    }

    it(`takes a Messages user turn of [tool_result, text] and gives the model both, in order (${upstreamApi} upstream)`, async () => {
      const upstream = upstreams.get(upstreamApi)!;
      const gateway = gateways.get(upstreamApi)!;
      upstream.script(
        {
          toolCalls: [
            { name: "exec", arguments: { code: 'return (await tools.lookup_order({ id: "B-1" })).total;' } },
          ],
        },
        { text: "Noted both." },
      );
      const chat = messagesConversation(gateway, "tool result then text");
      const first = await chat.ask(false);
      chat.answer({ [first.calls[0]!.id]: { total: 5 } }, "Also, ship it today.");
      const second = await chat.ask(false);
      expect(second.text).toBe("Noted both.");
      const sent = upstreamText(upstream.bodies[1]);
      const resultAt = sent.indexOf('\\"value\\":5');
      expect(resultAt).toBeGreaterThan(0);
      expect(sent.indexOf("Also, ship it today.")).toBeGreaterThan(resultAt);
    });

    it(`words a Messages client's errors in Messages terms (${upstreamApi} upstream)`, async () => {
      const upstream = upstreams.get(upstreamApi)!;
      const gateway = gateways.get(upstreamApi)!;
      upstream.script({
        toolCalls: [{ name: "exec", arguments: { code: 'return await tools.lookup_order({ id: "C-1" });' } }],
      });
      const chat = messagesConversation(gateway, "words");
      expect((await chat.ask(false)).calls).toHaveLength(1);
      // The user's words without the tool_result the last answer asked for.
      chat.answer({}, "I will not answer the tool.");
      const error = await rejectionOf(chat.ask(false), Anthropic.APIError);
      expect(error.status).toBe(400);
      expect(error.message).toContain("tool_result");
      expect(error.message).not.toContain('"tool" message');
    });
  }

  it("refuses a tool under tools.approval in a cell with a reason an HTTP agent client can act on", async () => {
    const upstream = upstreams.get("chat-completions")!;
    upstream.script(
      {
        toolCalls: [
          {
            name: "exec",
            arguments: {
              code: 'try { await tools.write_file({ path: "x.txt", content: "y" }); return "written"; } catch (error) { return error.message; }',
            },
          },
        ],
      },
      (body) => ({ text: String(lastToolResult(body).value) }),
    );
    const reply = await chatConversation(gateways.get("chat-completions")!, "write it").ask(false);
    expect(reply.text).toContain("needs the user's approval (tools.approval)");
    expect(reply.text).toContain("agent endpoint");
    expect(reply.text).not.toMatch(/elicitation|MCP client cannot/);
  });

  it("answers 404 in each API's own shape when there is no agent section, or nothing at the path", async () => {
    const missing = await rejectionOf(
      new Anthropic({ baseURL: off.url.replace(/\/$/, ""), apiKey: TOKEN, maxRetries: 0 }).messages.create({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
      }),
      Anthropic.APIError,
    );
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect(missing.error).toMatchObject({
      type: "error",
      error: { type: "not_found_error", message: expect.stringContaining("no agent section") },
    });
    const chatMissing = await rejectionOf(
      new OpenAI({ baseURL: `${off.url}v1`, apiKey: TOKEN, maxRetries: 0 }).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
      }),
      OpenAI.APIError,
    );
    expect(chatMissing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(chatMissing.error).toMatchObject({
      type: "invalid_request_error",
      code: "not_found",
      message: expect.stringContaining("no agent section"),
    });
    const nowhere = await fetch(`${gateways.get("chat-completions")!.url}v1/nothing`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toMatchObject({
      error: { type: "invalid_request_error", code: "not_found" },
    });
  });
});

/** The last exec or wait result an upstream body carries, parsed, in either API's shape. */
function lastResult(api: WireApi, body: Record<string, unknown>): Record<string, unknown> {
  if (api === "chat-completions") return lastToolResult(body);
  const blocks = (body.messages as Array<{ content: unknown }>).flatMap((message) =>
    Array.isArray(message.content) ? (message.content as Array<Record<string, unknown>>) : [],
  );
  const result = blocks.filter((block) => block.type === "tool_result").at(-1);
  return JSON.parse(String(result?.content)) as Record<string, unknown>;
}
