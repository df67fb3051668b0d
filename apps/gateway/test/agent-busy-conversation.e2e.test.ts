import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { heldReply, rejectionOf, upstreamMessages } from "./support/agent-endpoint.js";

const TOKEN = "agent-busy-token-0123456789ab";
const CHAT_TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "lookup_order",
      description: "Look an order up in the app's database.",
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    },
  },
];
const MESSAGES_TOOLS: Tool[] = [
  {
    name: "lookup_order",
    description: "Look an order up in the app's database.",
    input_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
  },
];
const EXEC_STEP = { toolCalls: [{ name: "exec", arguments: { code: 'text("ran"); return 1' } }] };

const roles = (body: Record<string, unknown> | undefined) =>
  upstreamMessages(body).map((message) => message.role);

// While a conversation is being answered, a second request on it (same codecell-session header, or the
// same visible messages) is refused with 409, and the first one's answer and hidden turns are kept: the
// conversation is marked taken, its record never removed. Memory and SQLite stores; Redis across
// replicas is in agent-replicas.e2e.test.ts.
for (const store of ["memory", "sqlite"] as const) {
  describe(`a conversation being answered (${store} store)`, () => {
    let upstream: ScriptedUpstream;
    let gateway: HttpGateway;

    beforeAll(async () => {
      upstream = await startScriptedUpstream();
      gateway = await startHttpGateway(
        makeSetup(
          baseConfig({
            tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
            mcpServers: {},
            http: { tokens: [{ name: "alice", token: TOKEN }] },
            agent: { upstream: { baseUrl: upstream.baseUrl, timeoutMs: 30_000 } },
            ...(store === "sqlite" ? { snapshotStore: { kind: "sqlite", path: "./runs.db" } } : {}),
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

    it("refuses a second request with the same codecell-session with 409, and loses nothing of the first", async () => {
      const openai = new OpenAI({
        baseURL: `${gateway.url}v1`,
        apiKey: TOKEN,
        maxRetries: 0,
        defaultHeaders: { "codecell-session": `busy-${store}` },
      });
      const held = heldReply({ text: "First answer." });
      upstream.script(EXEC_STEP, held.step, { text: "Second answer." });
      const first = openai.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "one" }],
        tools: CHAT_TOOLS,
      });
      await held.reached;
      const busy = await rejectionOf(
        openai.chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "something else" }],
          tools: CHAT_TOOLS,
        }),
        OpenAI.APIError,
      );
      expect(busy.status).toBe(409);
      expect(busy.message).toContain("being answered right now");
      // The refused request never reached the model.
      expect(upstream.bodies).toHaveLength(2);
      held.release();
      expect((await first).choices[0]?.message.content).toBe("First answer.");
      const next = await openai.chat.completions.create({
        model: "m",
        messages: [
          { role: "user", content: "one" },
          { role: "assistant", content: "First answer." },
          { role: "user", content: "two" },
        ],
        tools: CHAT_TOOLS,
      });
      expect(next.choices[0]?.message.content).toBe("Second answer.");
      // The model sees the first request's hidden exec call and its result.
      expect(roles(upstream.bodies[2])).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    });

    it("refuses a second request with the same visible messages while the first streams (Messages API)", async () => {
      const anthropic = new Anthropic({
        baseURL: gateway.url.replace(/\/$/, ""),
        apiKey: TOKEN,
        maxRetries: 0,
      });
      const held = heldReply({ text: "Streamed answer." });
      upstream.script(EXEC_STEP, held.step, { text: "Next answer." });
      const messages: MessageParam[] = [{ role: "user", content: `same words, ${store}` }];
      const first = anthropic.messages
        .stream({ model: "m", max_tokens: 100, messages, tools: MESSAGES_TOOLS })
        .finalMessage();
      await held.reached;
      const busy = await rejectionOf(
        anthropic.messages.create({ model: "m", max_tokens: 100, messages, tools: MESSAGES_TOOLS }),
        Anthropic.APIError,
      );
      expect(busy.status).toBe(409);
      expect(busy.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      expect(upstream.bodies).toHaveLength(2);
      held.release();
      const answer = await first;
      expect(answer.content).toEqual([{ type: "text", text: "Streamed answer." }]);
      const next = await anthropic.messages.create({
        model: "m",
        max_tokens: 100,
        messages: [
          ...messages,
          { role: "assistant", content: answer.content },
          { role: "user", content: "more" },
        ],
        tools: MESSAGES_TOOLS,
      });
      expect(next.content).toEqual([{ type: "text", text: "Next answer." }]);
      expect(roles(upstream.bodies[2])).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    });

    it("frees the conversation on every way out: an upstream failure, a client that goes away", async () => {
      const openai = new OpenAI({
        baseURL: `${gateway.url}v1`,
        apiKey: TOKEN,
        maxRetries: 0,
        defaultHeaders: { "codecell-session": `ways-out-${store}` },
      });
      const ask = (signal?: AbortSignal) =>
        openai.chat.completions.create(
          { model: "m", messages: [{ role: "user", content: "hello" }], tools: CHAT_TOOLS },
          signal ? { signal } : {},
        );
      upstream.script({ status: 500, body: { error: { message: "upstream broke" } } });
      expect((await rejectionOf(ask(), OpenAI.APIError)).status).toBe(502);
      const held = heldReply({ text: "never read" });
      upstream.script(held.step);
      const controller = new AbortController();
      const gone = ask(controller.signal);
      await held.reached;
      controller.abort();
      await expect(gone).rejects.toThrow();
      held.release();
      // Bounded wait for the gateway to see the client go and end the request.
      let answer: string | null | undefined;
      for (let attempt = 0; attempt < 100 && answer === undefined; attempt++) {
        upstream.script({ text: "Free again." });
        try {
          answer = (await ask()).choices[0]?.message.content;
        } catch (error) {
          if (!(error instanceof OpenAI.APIError) || error.status !== 409) throw error;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      expect(answer).toBe("Free again.");
    });
  });
}
