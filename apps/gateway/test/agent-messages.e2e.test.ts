import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { HttpGateway } from "./harness.js";
import {
  type AgentGateways,
  lastToolResult,
  rejectionOf,
  startAgentGateways,
  upstreamMessages,
  upstreamToolNames,
} from "./support/agent-endpoint.js";

const ALICE = "agent-alice-token-0123456789";

/** The client's own tools, as an app declares them for the Messages API. */
const CLIENT_TOOLS: Tool[] = [
  {
    name: "select_file",
    description: "Ask the user to pick a file in the editor.",
    input_schema: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
  },
  {
    name: "open_tab",
    description: "Open a path in a new editor tab.",
    input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];

/** The message of a Messages API error body, as the client got it. */
const messageOf = (error: InstanceType<typeof Anthropic.APIError>) =>
  String((error.error as { error?: { message?: unknown } } | undefined)?.error?.message);

function client(gateway: HttpGateway, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({
    baseURL: gateway.url.replace(/\/$/, ""),
    apiKey: ALICE,
    maxRetries: 0,
    defaultHeaders: headers,
  });
}

const apiError = (promise: Promise<unknown>) => rejectionOf(promise, Anthropic.APIError);

describe("the agent endpoint: POST /v1/messages on a Chat Completions upstream", () => {
  let upstream: ScriptedUpstream;
  let gateways: AgentGateways;
  let gateway: HttpGateway;
  let off: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateways = await startAgentGateways(upstream, {
      tokens: [{ name: "alice", token: ALICE }],
      codeModeConfig: { tools: { codeMode: { enabled: true, timeoutMs: 3000 } }, mcpServers: {} },
    });
    ({ codeMode: gateway, passThrough: off } = gateways);
  });
  afterAll(async () => {
    await gateways?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
  });

  describe("code mode", () => {
    it("sends exactly exec and wait upstream, maps the system prompt and sums usage", async () => {
      upstream.script(
        { toolCalls: [{ name: "exec", arguments: { code: "return ALL_TOOLS.map((tool) => tool.id)" } }] },
        (body) => ({
          text: `ids: ${JSON.stringify(lastToolResult(body).value)}`,
          usage: { prompt: 7, completion: 3 },
        }),
      );
      // temperature is no longer in the client's types, but older clients send it: it goes on as it is.
      const answer = await client(gateway).messages.create({
        model: "m",
        max_tokens: 256,
        system: [{ type: "text", text: "You are terse." }],
        messages: [{ role: "user", content: "what tools are there?" }],
        tools: CLIENT_TOOLS,
        ...({ temperature: 0.3 } as object),
      });
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) {
        expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
        expect(body).toMatchObject({ max_tokens: 256, temperature: 0.3 });
      }
      expect(JSON.stringify(upstream.bodies[0]?.tools)).not.toContain("Ask the user to pick a file");
      expect(upstreamMessages(upstream.bodies[0])).toEqual([
        { role: "system", content: "You are terse." },
        { role: "user", content: "what tools are there?" },
      ]);
      const ids = lastToolResult(upstream.bodies[1]!).value as string[];
      expect(ids).toEqual(expect.arrayContaining(["client:app:select_file", "client:app:open_tab"]));
      expect(answer).toMatchObject({ type: "message", role: "assistant", stop_reason: "end_turn" });
      expect(answer.id).toMatch(/^msg_/);
      expect(answer.content).toHaveLength(1);
      const block = answer.content[0]!;
      expect(block.type === "text" && block.text).toContain("client:app:select_file");
      expect(answer.usage).toMatchObject({ input_tokens: 17, output_tokens: 8 });
    });

    it("hands a client tool call back as tool_use blocks and resumes the run with the tool_result", async () => {
      const anthropic = client(gateway);
      upstream.script(
        {
          text: "Let me ask.",
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: 'const picked = await tools.select_file({ pattern: "*.md" }); text("picked " + picked.path); return picked;',
              },
            },
          ],
        },
        (body) => ({ text: `Cell said: ${JSON.stringify(lastToolResult(body))}` }),
      );
      const messages: MessageParam[] = [{ role: "user", content: "open the readme" }];
      const { data: first, response } = await anthropic.messages
        .create({ model: "m", max_tokens: 100, messages, tools: CLIENT_TOOLS })
        .withResponse();
      expect(response.headers.get("codecell-thread")).toMatch(/^thread_/);
      expect(first.stop_reason).toBe("tool_use");
      expect(first.content.map((block) => block.type)).toEqual(["text", "tool_use"]);
      expect(first.content[0]).toEqual({ type: "text", text: "Let me ask." });
      const use = first.content[1]!;
      if (use.type !== "tool_use") throw new Error("not a tool_use block");
      expect(use).toMatchObject({ name: "select_file", input: { pattern: "*.md" } });
      expect(upstream.bodies).toHaveLength(1);

      messages.push(
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: use.id, content: JSON.stringify({ path: "README.md" }) },
          ],
        },
      );
      const second = await anthropic.messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: CLIENT_TOOLS,
      });
      expect(second.stop_reason).toBe("end_turn");
      const text = second.content[0]!;
      expect(text.type === "text" && text.text).toContain("picked README.md");
      // The model saw its own exec call and the cell's result, never the client's select_file call.
      const resumed = upstreamMessages(upstream.bodies[1]);
      expect(resumed.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
        status: "completed",
        value: { path: "README.md" },
      });

      // The next user turn: the hidden transcript goes upstream again, so the model sees its earlier cell.
      messages.push({ role: "assistant", content: second.content }, { role: "user", content: "and now?" });
      upstream.script({ text: "All done." });
      const third = await anthropic.messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: CLIENT_TOOLS,
      });
      expect(third.content).toEqual([{ type: "text", text: "All done." }]);
      const next = upstreamMessages(upstream.bodies[2]);
      expect(next.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant", "user"]);
      expect(JSON.stringify(next[1])).toContain("tools.select_file");
    });

    it("hands out parallel calls, and a tool_result with is_error is a catchable error in the cell", async () => {
      const anthropic = client(gateway, { "codecell-session": "messages-parallel-1" });
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: `
                  const [picked, opened] = await Promise.allSettled([
                    tools.select_file({ pattern: "*.ts" }),
                    tools.open_tab({ path: "/etc/passwd" }),
                  ]);
                  return { picked: picked.value, opened: opened.status, reason: opened.reason?.message };`,
              },
            },
          ],
        },
        (body) => ({ text: JSON.stringify(lastToolResult(body).value) }),
      );
      const messages: MessageParam[] = [{ role: "user", content: "two things" }];
      const first = await anthropic.messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: CLIENT_TOOLS,
      });
      const uses = first.content.filter((block) => block.type === "tool_use");
      expect(uses.map((block) => block.name).sort()).toEqual(["open_tab", "select_file"]);
      messages.push(
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: uses.map((block) =>
            block.name === "select_file"
              ? { type: "tool_result" as const, tool_use_id: block.id, content: '{"path":"a.ts"}' }
              : {
                  type: "tool_result" as const,
                  tool_use_id: block.id,
                  content: [{ type: "text" as const, text: "outside the workspace" }],
                  is_error: true,
                },
          ),
        },
      );
      const second = await anthropic.messages.create({
        model: "m",
        max_tokens: 100,
        messages,
        tools: CLIENT_TOOLS,
      });
      const block = second.content[0]!;
      const value = JSON.parse(block.type === "text" ? block.text : "null");
      expect(value).toMatchObject({ picked: { path: "a.ts" }, opened: "rejected" });
      expect(value.reason).toContain("outside the workspace");
    });

    it("sends an image block to the Chat Completions upstream as an image_url part", async () => {
      upstream.script({ text: "a red dot" });
      await client(gateway).messages.create({
        model: "m",
        max_tokens: 50,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "what is this?" },
              { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
            ],
          },
        ],
        tools: CLIENT_TOOLS,
      });
      expect(upstreamMessages(upstream.bodies[0])[0]).toEqual({
        role: "user",
        content: [
          { type: "text", text: "what is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        ],
      });
    });
  });

  describe("streaming", () => {
    it("streams the Messages events: the client's stream helper reads the text, the tool_use blocks and the summed usage", async () => {
      const anthropic = client(gateway);
      upstream.script(
        {
          text: "Looking now.",
          toolCalls: [
            {
              name: "exec",
              arguments: { code: 'const p = await tools.select_file({ pattern: "*.ts" }); return p.path;' },
            },
          ],
          usage: { prompt: 6, completion: 4 },
        },
        (body) => ({ text: `Got ${lastToolResult(body).value}.`, usage: { prompt: 9, completion: 2 } }),
      );
      const messages: MessageParam[] = [{ role: "user", content: "pick a ts file" }];
      const stream = anthropic.messages.stream({
        model: "m",
        max_tokens: 100,
        messages,
        tools: CLIENT_TOOLS,
      });
      const pieces: string[] = [];
      stream.on("text", (text) => pieces.push(text));
      const first = await stream.finalMessage();
      expect(upstream.bodies[0]).toMatchObject({ stream: true });
      expect(pieces.length).toBeGreaterThan(1);
      expect(pieces.join("")).toBe("Looking now.");
      expect(first.stop_reason).toBe("tool_use");
      expect(first.content.map((block) => block.type)).toEqual(["text", "tool_use"]);
      const use = first.content[1]!;
      if (use.type !== "tool_use") throw new Error("not a tool_use block");
      expect(use).toMatchObject({ name: "select_file", input: { pattern: "*.ts" } });
      expect(first.usage).toMatchObject({ input_tokens: 6, output_tokens: 4 });

      messages.push(
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: '{"path":"b.ts"}' }] },
      );
      const second = await anthropic.messages
        .stream({ model: "m", max_tokens: 100, messages, tools: CLIENT_TOOLS })
        .finalMessage();
      expect(second.stop_reason).toBe("end_turn");
      expect(second.content).toEqual([{ type: "text", text: "Got b.ts." }]);
      expect(second.usage).toMatchObject({ input_tokens: 9, output_tokens: 2 });
    });

    it("streams a translated pass-through answer, and a failure after the start as an error event", async () => {
      upstream.script({ text: "plain streamed text" });
      const stream = client(gateway).messages.stream({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(await stream.finalText()).toBe("plain streamed text");

      // The first model turn streams text, the second fails: the status went out, the error is an event.
      upstream.script(
        { text: "Working on it.", toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] },
        { status: 500, body: { error: { message: "upstream fell over" } } },
      );
      const failing = client(gateway).messages.stream({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "fail later" }],
        tools: CLIENT_TOOLS,
      });
      const error = await failing.finalMessage().then(
        () => null,
        (failure: unknown) => failure,
      );
      expect(error).toBeInstanceOf(Anthropic.APIError);
      expect(String((error as Error).message)).toContain("upstream fell over");
    });
  });

  describe("pass-through, translated", () => {
    it("with code mode off, sends the client's tools and parameters as Chat Completions and answers in Messages terms", async () => {
      upstream.script({
        toolCalls: [{ name: "select_file", arguments: { pattern: "*.md" }, id: "up_call_1" }],
        usage: { prompt: 4, completion: 2 },
      });
      const answer = await client(off).messages.create({
        model: "m-direct",
        max_tokens: 64,
        system: "Be brief.",
        stop_sequences: ["END"],
        metadata: { user_id: "u-1" },
        tool_choice: { type: "any" },
        messages: [{ role: "user", content: "pick a file" }],
        tools: CLIENT_TOOLS,
      });
      expect(upstream.bodies).toHaveLength(1);
      expect(upstream.bodies[0]).toMatchObject({
        model: "m-direct",
        max_tokens: 64,
        stop: ["END"],
        user: "u-1",
        tool_choice: "required",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "pick a file" },
        ],
      });
      expect(upstreamToolNames(upstream.bodies[0])).toEqual(["select_file", "open_tab"]);
      expect(JSON.stringify(upstream.bodies[0]?.tools)).toContain("Ask the user to pick a file");
      expect(answer.stop_reason).toBe("tool_use");
      expect(answer.content).toEqual([
        { type: "tool_use", id: "up_call_1", name: "select_file", input: { pattern: "*.md" } },
      ]);
      expect(answer.usage).toMatchObject({ input_tokens: 4, output_tokens: 2 });

      // The client's tool_result goes upstream as a tool message.
      upstream.script({ text: "Picked it." });
      const second = await client(off).messages.create({
        model: "m-direct",
        max_tokens: 64,
        messages: [
          { role: "user", content: "pick a file" },
          { role: "assistant", content: answer.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "up_call_1", content: "a.md" }] },
        ],
        tools: CLIENT_TOOLS,
      });
      expect(upstreamMessages(upstream.bodies[1]).slice(1)).toEqual([
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "up_call_1",
              type: "function",
              function: { name: "select_file", arguments: '{"pattern":"*.md"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "up_call_1", content: "a.md" },
      ]);
      expect(second.content).toEqual([{ type: "text", text: "Picked it." }]);
    });

    it("with code mode on, passes requests without tools and with tool_choice none through", async () => {
      upstream.script({ text: "plain" }, { text: "no tools wanted" });
      const plain = await client(gateway).messages.create({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(plain.content).toEqual([{ type: "text", text: "plain" }]);
      expect(upstream.bodies[0]).not.toHaveProperty("tools");
      const none = await client(gateway).messages.create({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
        tools: CLIENT_TOOLS,
        tool_choice: { type: "none" },
      });
      expect(none.content).toEqual([{ type: "text", text: "no tools wanted" }]);
      expect(upstream.bodies[1]).toMatchObject({ tool_choice: "none" });
      expect(upstreamToolNames(upstream.bodies[1])).toEqual(["select_file", "open_tab"]);
    });
  });

  describe("errors in the Messages API's shape", () => {
    it("refuses what Chat Completions cannot take, server tools and unknown roles, saying what to change", async () => {
      const anthropic = client(gateway);
      const tier = await apiError(
        anthropic.messages.create({
          model: "m",
          max_tokens: 10,
          service_tier: "auto",
          messages: [{ role: "user", content: "hi" }],
          tools: CLIENT_TOOLS,
        }),
      );
      expect(tier).toBeInstanceOf(Anthropic.BadRequestError);
      expect(tier.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      expect(messageOf(tier)).toContain('"service_tier" has no counterpart in Chat Completions');
      const server = await apiError(
        anthropic.messages.create({
          model: "m",
          max_tokens: 10,
          messages: [{ role: "user", content: "hi" }],
          tools: [...CLIENT_TOOLS, { type: "web_search_20250305", name: "web_search" }],
        }),
      );
      expect(server.status).toBe(400);
      expect(messageOf(server)).toContain('tools[2] is a "web_search_20250305" tool');
      const document = await apiError(
        anthropic.messages.create({
          model: "m",
          max_tokens: 10,
          messages: [
            {
              role: "user",
              content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x" } }],
            },
          ],
          tools: CLIENT_TOOLS,
        }),
      );
      expect(messageOf(document)).toContain('messages[0].content[0] is a "document" block');
      expect(upstream.bodies).toHaveLength(0);
    });

    it("answers tool results for calls that are not pending with a conflict", async () => {
      const error = await apiError(
        client(gateway).messages.create({
          model: "m",
          max_tokens: 10,
          messages: [
            { role: "user", content: "hi" },
            {
              role: "assistant",
              content: [{ type: "tool_use", id: "toolu_x", name: "open_tab", input: {} }],
            },
            { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_x", content: "ok" }] },
          ],
          tools: CLIENT_TOOLS,
        }),
      );
      expect(error.status).toBe(409);
      expect(messageOf(error)).toContain("Tool results for calls that are not pending: toolu_x");
    });

    it("maps the upstream's 404 to not_found_error, and a missing token to a 401", async () => {
      upstream.script({ status: 404, body: { error: { message: "no such model: m-x" } } });
      const missing = await apiError(
        client(gateway).messages.create({
          model: "m-x",
          max_tokens: 10,
          messages: [{ role: "user", content: "hi" }],
          tools: CLIENT_TOOLS,
        }),
      );
      expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
      expect(missing.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
      expect(messageOf(missing)).toContain("no such model: m-x");

      const response = await fetch(`${gateway.url}v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }] }),
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({
        type: "error",
        error: { type: "authentication_error", message: expect.stringContaining("x-api-key") },
      });
      const wrong = await apiError(
        new Anthropic({ baseURL: gateway.url, apiKey: "not-a-token", maxRetries: 0 }).messages.create({
          model: "m",
          max_tokens: 1,
          messages: [{ role: "user", content: "x" }],
        }),
      );
      expect(wrong.status).toBe(401);
      expect(messageOf(wrong)).toContain("The bearer token is not valid");
    });
  });
});
