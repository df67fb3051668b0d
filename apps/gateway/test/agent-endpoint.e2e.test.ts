// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { generateText, stepCountIs, tool } from "ai";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import {
  type AgentGateways,
  lastToolResult,
  rejectionOf,
  startAgentGateways,
  upstreamMessages,
  upstreamToolNames,
} from "./support/agent-endpoint.js";

const ALICE = "agent-alice-token-0123456789";
const BOB = "agent-bob-token-0123456789abc";

/** The client's own tools, as an app declares them. */
const CLIENT_TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "select_file",
      description: "Ask the user to pick a file in the editor.",
      parameters: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
    },
  },
  {
    type: "function",
    function: {
      name: "open_tab",
      description: "Open a path in a new editor tab.",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
];

function client(gateway: HttpGateway, token = ALICE, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: token, maxRetries: 0, defaultHeaders: headers });
}

const apiError = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);

describe("the agent endpoint: POST /v1/chat/completions", () => {
  let upstream: ScriptedUpstream;
  let gateways: AgentGateways;
  let gateway: HttpGateway;
  let off: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateways = await startAgentGateways(upstream, {
      tokens: [
        { name: "alice", token: ALICE },
        { name: "bob", token: BOB },
      ],
      codeModeConfig: {
        tools: { codeMode: { enabled: true, timeoutMs: 3000 }, deny: ["core:codecell:write_file"] },
      },
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

  describe("pass-through", () => {
    it("with code mode off, forwards the body and the client's tools unchanged and returns the answer as is", async () => {
      upstream.script({ toolCalls: [{ name: "select_file", arguments: { pattern: "*.md" } }] });
      const request = {
        model: "m-direct",
        messages: [{ role: "user" as const, content: "pick a file" }],
        tools: CLIENT_TOOLS,
        temperature: 0.2,
      };
      const answer = await client(off).chat.completions.create(request);
      expect(upstream.bodies).toEqual([request]);
      expect(answer.choices[0]?.message.tool_calls?.[0]).toMatchObject({
        function: { name: "select_file", arguments: '{"pattern":"*.md"}' },
      });
      expect(answer.id).toBe("up-1");
    });

    it("with code mode on, passes requests without tools and with tool_choice none through", async () => {
      upstream.script({ text: "plain" }, { text: "no tools wanted" });
      const plain = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };
      expect((await client(gateway).chat.completions.create(plain)).choices[0]?.message.content).toBe(
        "plain",
      );
      const none = { ...plain, tools: CLIENT_TOOLS, tool_choice: "none" as const };
      const answer = await client(gateway).chat.completions.create(none);
      expect(answer.choices[0]?.message.content).toBe("no tools wanted");
      expect(upstream.bodies).toEqual([plain, none]);
    });

    it("returns the upstream's error status and body unchanged", async () => {
      upstream.script({
        status: 404,
        body: { error: { message: "no such model: m-x", type: "invalid_request_error" } },
      });
      const error = await apiError(
        client(off).chat.completions.create({ model: "m-x", messages: [{ role: "user", content: "x" }] }),
      );
      expect(error.status).toBe(404);
      expect(error.message).toContain("no such model: m-x");
    });
  });

  describe("code mode", () => {
    it("sends exactly exec and wait upstream, with ALL_TOOLS holding the client's and the gateway's tools", async () => {
      upstream.script(
        { toolCalls: [{ name: "exec", arguments: { code: "return ALL_TOOLS.map((tool) => tool.id)" } }] },
        (body) => ({
          text: `ids: ${JSON.stringify(lastToolResult(body).value)}`,
          usage: { prompt: 7, completion: 3 },
        }),
      );
      const answer = await client(gateway).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "what tools are there?" }],
        tools: CLIENT_TOOLS,
      });
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
      // The client's tool schemas never reach the model directly.
      expect(JSON.stringify(upstream.bodies[0]?.tools)).not.toContain("Ask the user to pick a file");
      const ids = lastToolResult(upstream.bodies[1]!).value as string[];
      expect(ids).toEqual(
        expect.arrayContaining(["client:app:select_file", "client:app:open_tab", "core:codecell:read_file"]),
      );
      expect(ids.some((id) => id.startsWith("plugin:"))).toBe(true);
      // Denied by policy: not in the catalog at all.
      expect(ids).not.toContain("core:codecell:write_file");
      expect(answer.choices[0]).toMatchObject({ finish_reason: "stop", message: { role: "assistant" } });
      expect(answer.choices[0]?.message.content).toContain("client:app:select_file");
      // Usage is the sum over the hidden upstream calls.
      expect(answer.usage).toEqual({ prompt_tokens: 17, completion_tokens: 8, total_tokens: 25 });
    });

    it("runs MCP servers' tools through MCP.<server>", async () => {
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: "const g = await MCP.memory.readGraph({}); return Array.isArray(g.structuredContent.entities)",
              },
            },
          ],
        },
        (body) => ({ text: `graph: ${JSON.stringify(lastToolResult(body))}` }),
      );
      const answer = await client(gateway).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "read the graph" }],
        tools: CLIENT_TOOLS,
      });
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({ status: "completed", value: true });
      expect(answer.choices[0]?.message.content).toContain('"value":true');
    });

    it("hands a client tool call back, resumes the run with the client's result, and answers with what ran after", async () => {
      const openai = client(gateway);
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
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "open the readme" }];
      const { data: first, response } = await openai.chat.completions
        .create({ model: "m", messages, tools: CLIENT_TOOLS })
        .withResponse();
      const thread = response.headers.get("codecell-thread");
      expect(thread).toMatch(/^thread_/);
      const choice = first.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBe("Let me ask.");
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0]!;
      expect(call.type).toBe("function");
      if (call.type !== "function") throw new Error("not a function call");
      expect(call.function.name).toBe("select_file");
      expect(JSON.parse(call.function.arguments)).toEqual({ pattern: "*.md" });
      // Only one upstream call so far: the run suspended at once, the model waits for its exec result.
      expect(upstream.bodies).toHaveLength(1);

      messages.push(choice.message, {
        role: "tool",
        tool_call_id: call.id,
        content: JSON.stringify({ path: "README.md" }),
      });
      const second = await openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      expect(second.choices[0]?.finish_reason).toBe("stop");
      expect(second.choices[0]?.message.content).toContain("picked README.md");
      // The model saw its own exec call and the cell's result, never the client's select_file call.
      const resumed = upstreamMessages(upstream.bodies[1]);
      expect(resumed.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
      expect(JSON.stringify(resumed)).not.toContain('select_file","arguments');
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
        status: "completed",
        value: { path: "README.md" },
        output: [{ type: "text", text: "picked README.md" }],
      });

      // The trajectory shows the hidden exec with the client call nested under it, and the resume.
      const trajectoryOf = async (token: string) =>
        (await (
          await fetch(`${gateway.url}v1/codecell/threads/${thread}/trajectory`, {
            headers: { authorization: `Bearer ${token}` },
          })
        ).json()) as { entries: Array<Record<string, unknown>> };
      const { entries } = await trajectoryOf(ALICE);
      const execCall =
        upstreamMessages(upstream.bodies[0]).length === 1
          ? upstreamMessages(upstream.bodies[1])[1]
          : undefined;
      const execId = (execCall?.tool_calls as Array<{ id: string }> | undefined)?.[0]?.id;
      expect(entries.find((entry) => entry.kind === "control" && entry.tool === "exec")).toMatchObject({
        toolCallId: execId,
      });
      expect(entries.find((entry) => entry.kind === "nested")).toMatchObject({
        tool: "client:app:select_file",
        parentToolCallId: execId,
        input: { pattern: "*.md" },
      });
      expect(entries.find((entry) => entry.tool === "wait")).toMatchObject({
        toolCallId: `${execId}/resume-1`,
        status: "completed",
      });
      expect((await trajectoryOf(BOB)).entries).toEqual([]);

      // The next user turn: the hidden transcript goes upstream again, so the model sees its earlier cell.
      messages.push(second.choices[0]!.message, { role: "user", content: "thanks, and now?" });
      upstream.script({ text: "All done." });
      const third = await openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      expect(third.choices[0]?.message.content).toBe("All done.");
      const next = upstreamMessages(upstream.bodies[2]);
      expect(next.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant", "user"]);
      expect(JSON.stringify(next[1])).toContain("tools.select_file");
    });

    it("hands out parallel client calls in one message, and a client's error is catchable in the cell", async () => {
      const openai = client(gateway, ALICE, { "codecell-session": "parallel-1" });
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
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "two things" }];
      const first = await openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      const calls = first.choices[0]!.message.tool_calls!;
      expect(calls.map((call) => (call.type === "function" ? call.function.name : "")).sort()).toEqual([
        "open_tab",
        "select_file",
      ]);
      messages.push(
        first.choices[0]!.message,
        ...calls.map((call) =>
          call.type === "function" && call.function.name === "select_file"
            ? { role: "tool" as const, tool_call_id: call.id, content: '{"path":"a.ts"}' }
            : { role: "tool" as const, tool_call_id: call.id, content: '{"error":"outside the workspace"}' },
        ),
      );
      const second = await openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      const value = JSON.parse(second.choices[0]!.message.content!);
      expect(value).toMatchObject({ picked: { path: "a.ts" }, opened: "rejected" });
      expect(value.reason).toContain("outside the workspace");
    });

    it("drives the Vercel AI SDK's tool loop: its tools run in the app, the cell gets their results", async () => {
      const provider = createOpenAICompatible({
        name: "codecell",
        baseURL: `${gateway.url}v1`,
        apiKey: ALICE,
      });
      const asked: string[] = [];
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: 'const f = await tools.select_file({ pattern: "*.json" }); return "size of " + f.path + ": " + f.size;',
              },
            },
          ],
        },
        (body) => ({ text: `The cell says: ${lastToolResult(body).value}` }),
      );
      const result = await generateText({
        model: provider("m-sdk"),
        prompt: "how big is the config?",
        tools: {
          select_file: tool({
            description: "Ask the user to pick a file in the editor.",
            inputSchema: z.object({ pattern: z.string() }),
            execute: async ({ pattern }) => {
              asked.push(pattern);
              return { path: "package.json", size: 512 };
            },
          }),
        },
        stopWhen: stepCountIs(4),
      });
      expect(asked).toEqual(["*.json"]);
      expect(result.text).toBe("The cell says: size of package.json: 512");
      expect(result.steps).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
    });

    it("streams: the openai client's stream helpers read the answer, the handed-out calls and the summed usage", async () => {
      const openai = client(gateway, ALICE, { "codecell-session": "stream-1" });
      upstream.script(
        {
          text: "Checking the files.",
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: 'const [a, b] = await Promise.all([tools.select_file({ pattern: "a" }), tools.select_file({ pattern: "b" })]); return a + b;',
              },
            },
          ],
          usage: { prompt: 100, completion: 20 },
        },
        (body) => ({
          text: `Both: ${lastToolResult(body).value}, streamed in pieces.`,
          usage: { prompt: 150, completion: 30 },
        }),
      );
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "stream it" }];
      const deltas: string[] = [];
      const first = openai.chat.completions.stream({
        model: "m",
        messages,
        tools: CLIENT_TOOLS,
        stream_options: { include_usage: true },
      });
      first.on("content", (delta) => deltas.push(delta));
      const handedOut = await first.finalChatCompletion();
      expect(deltas.join("")).toBe("Checking the files.");
      expect(deltas.length).toBeGreaterThan(1);
      const choice = handedOut.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      const calls = choice.message.tool_calls ?? [];
      expect(
        calls.map((call) => (call.type === "function" ? JSON.parse(call.function.arguments) : null)),
      ).toEqual([{ pattern: "a" }, { pattern: "b" }]);
      expect(handedOut.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 });
      // The upstream was asked to stream too.
      expect(upstream.bodies[0]).toMatchObject({ stream: true, stream_options: { include_usage: true } });

      messages.push(
        { role: "assistant", content: choice.message.content, tool_calls: calls },
        ...calls.map((call, index) => ({
          role: "tool" as const,
          tool_call_id: call.id,
          content: JSON.stringify(`<${index}>`),
        })),
      );
      // The plain async iterator of create({ stream: true }) works as well.
      const chunks = [];
      const stream = await openai.chat.completions.create({
        model: "m",
        messages,
        tools: CLIENT_TOOLS,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of stream) chunks.push(chunk);
      const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
      expect(text).toBe("Both: <0><1>, streamed in pieces.");
      expect(chunks.filter((chunk) => (chunk.choices[0]?.delta.content ?? "") !== "").length).toBeGreaterThan(
        2,
      );
      expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
      // The usage chunk comes last, with no choices; it sums this request's upstream calls.
      expect(chunks.at(-1)).toMatchObject({
        choices: [],
        usage: { prompt_tokens: 150, completion_tokens: 30, total_tokens: 180 },
      });
    });

    it("ends a stream that already started with an error event the openai client raises", async () => {
      upstream.script(
        { text: "Working on it.", toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] },
        { status: 500, body: { error: { message: "upstream fell over" } } },
      );
      const stream = await client(gateway).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "stream then fail" }],
        tools: CLIENT_TOOLS,
        stream: true,
      });
      const seen: string[] = [];
      const failure = await (async () => {
        try {
          for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? "");
        } catch (error) {
          return error as Error;
        }
        return null;
      })();
      expect(seen.join("")).toBe("Working on it.");
      expect(failure).toBeInstanceOf(OpenAI.APIError);
      expect(failure?.message).toContain("upstream fell over");
    });

    it("streams without usage unless asked, and passes a streamed request through unchanged with code mode off", async () => {
      upstream.script({ text: "no usage here" });
      const chunks = [];
      for await (const chunk of await client(gateway).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "stream, no usage" }],
        tools: CLIENT_TOOLS,
        stream: true,
      })) {
        chunks.push(chunk);
      }
      expect(chunks.every((chunk) => !chunk.usage)).toBe(true);
      expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("no usage here");

      upstream.script({ text: "direct stream" });
      const direct = [];
      for await (const chunk of await client(off).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "direct" }],
        tools: CLIENT_TOOLS,
        stream: true,
      })) {
        direct.push(chunk);
      }
      expect(direct.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("direct stream");
      // Chunks as the upstream wrote them (its ids), and the body as the client sent it.
      expect(direct[0]?.id).toBe("up-2");
      expect(upstream.bodies[1]).toEqual({
        model: "m",
        messages: [{ role: "user", content: "direct" }],
        tools: CLIENT_TOOLS,
        stream: true,
      });
    });

    it("refuses tool results for calls that are not pending, and another principal's conversation", async () => {
      const alice = client(gateway);
      upstream.script({
        toolCalls: [
          { name: "exec", arguments: { code: 'return await tools.select_file({ pattern: "x" })' } },
        ],
      });
      const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "isolation" }];
      const first = await alice.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      const call = first.choices[0]!.message.tool_calls![0]!;
      messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: '"x.md"' });

      // Bob sends exactly Alice's conversation: for him nothing is pending.
      const stolen = await apiError(
        client(gateway, BOB).chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS }),
      );
      expect(stolen.status).toBe(409);
      expect(stolen.message).toContain("not pending");
      // A result for a call nobody asked for.
      const forged = await apiError(
        alice.chat.completions.create({
          model: "m",
          tools: CLIENT_TOOLS,
          messages: [
            { role: "user", content: "never asked" },
            {
              role: "assistant",
              content: null,
              tool_calls: [
                { id: "call_forged", type: "function", function: { name: "select_file", arguments: "{}" } },
              ],
            },
            { role: "tool", tool_call_id: "call_forged", content: "{}" },
          ],
        }),
      );
      expect(forged.status).toBe(409);
      expect(upstream.bodies).toHaveLength(1);
      // Alice's run is still there for her.
      upstream.script((body) => ({ text: `got ${JSON.stringify(lastToolResult(body).value)}` }));
      const done = await alice.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
      expect(done.choices[0]?.message.content).toBe('got "x.md"');
    });

    it("stops at the turn cap with an error that says what to do", async () => {
      const loop = { toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] };
      upstream.script(loop, loop, loop, loop, loop);
      const error = await apiError(
        client(gateway).chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "loop forever" }],
          tools: CLIENT_TOOLS,
        }),
      );
      expect(error.status).toBe(422);
      expect(error.message).toContain("agent.maxModelTurns");
      expect(upstream.bodies).toHaveLength(4);
    });

    it("reports upstream 4xx, 5xx, a dropped connection, a malformed answer and a foreign tool call clearly", async () => {
      const openai = client(gateway);
      const ask = (content: string) =>
        apiError(
          openai.chat.completions.create({
            model: "m",
            messages: [{ role: "user", content }],
            tools: CLIENT_TOOLS,
          }),
        );
      upstream.script({ status: 400, body: { error: { message: "context too long" } } });
      const clientError = await ask("a");
      expect(clientError.status).toBe(400);
      expect(clientError.message).toContain("context too long");
      upstream.script({ status: 503, body: { error: { message: "overloaded" } } });
      const serverError = await ask("b");
      expect(serverError.status).toBe(502);
      expect(serverError.message).toMatch(/answered 503: overloaded/);
      upstream.script({ destroy: true });
      const down = await ask("c");
      expect(down.status).toBe(504);
      expect(down.message).toContain("could not be reached");
      upstream.script({ raw: "<html>not an API</html>", contentType: "text/html" });
      const malformed = await ask("d");
      expect(malformed.status).toBe(502);
      expect(malformed.message).toContain("not a Chat Completions answer");
      upstream.script({ toolCalls: [{ name: "select_file", arguments: {} }] });
      const foreign = await ask("e");
      expect(foreign.status).toBe(502);
      expect(foreign.message).toContain("offered only exec and wait");
      upstream.script({ hang: true });
      const slow = await ask("f");
      expect(slow.status).toBe(504);
      expect(slow.message).toContain("agent.upstream.timeoutMs");
    });

    it("keeps what a cell did when the upstream fails after it, and the same request goes on without running it again", async () => {
      const openai = client(gateway);
      const request = {
        model: "m",
        messages: [{ role: "user" as const, content: "count once" }],
        tools: CLIENT_TOOLS,
      };
      upstream.script(
        { toolCalls: [{ name: "exec", arguments: { code: 'text("ran"); return 41 + 1' } }] },
        { status: 500, body: { error: { message: "boom" } } },
      );
      expect((await apiError(openai.chat.completions.create(request))).status).toBe(502);
      upstream.script((body) => ({ text: `value ${JSON.stringify(lastToolResult(body).value)}` }));
      const retried = await openai.chat.completions.create(request);
      expect(retried.choices[0]?.message.content).toBe("value 42");
      // The retry went straight to the model with the cell's result; the cell did not run again.
      expect(upstream.bodies).toHaveLength(3);
      expect(upstreamMessages(upstream.bodies[2]).map((message) => message.role)).toEqual([
        "user",
        "assistant",
        "tool",
      ]);
    });

    it("a client that goes away cancels the upstream call, and the conversation is free again", async () => {
      const openai = client(gateway, ALICE, { "codecell-session": "abort-1" });
      upstream.script({ hang: true });
      const controller = new AbortController();
      const received = upstream.bodies.length;
      const pending = openai.chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "slow" }], tools: CLIENT_TOOLS },
        { signal: controller.signal },
      );
      // The client goes away once the model holds its request.
      for (let attempt = 0; attempt < 1000 && upstream.bodies.length === received; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      controller.abort();
      await expect(pending).rejects.toThrow();
      for (let attempt = 0; attempt < 1000 && upstream.abandoned() < 1; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(upstream.abandoned()).toBeGreaterThanOrEqual(1);
      upstream.script({ text: "fresh" });
      // The gateway frees the conversation as the cancelled request unwinds, a moment after the upstream
      // call ends: a retry in that moment is told the conversation is busy (409), never loses it.
      const retry = () =>
        openai.chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "slow" }],
          tools: CLIENT_TOOLS,
        });
      let again = await retry().catch((error: unknown) => error);
      for (
        let attempt = 0;
        attempt < 100 && again instanceof OpenAI.APIError && again.status === 409;
        attempt++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        again = await retry().catch((error: unknown) => error);
      }
      if (again instanceof Error) throw again;
      expect((again as OpenAI.ChatCompletion).choices[0]?.message.content).toBe("fresh");
    });

    it("needs the bearer token and refuses bad requests with a reason", async () => {
      const anonymous = await fetch(`${gateway.url}v1/chat/completions`, { method: "POST", body: "{}" });
      expect(anonymous.status).toBe(401);
      expect(((await anonymous.json()) as { error: { message: string } }).error.message).toContain(
        "bearer token",
      );
      const noMessages = await apiError(
        client(gateway).chat.completions.create({ model: "m", messages: [], tools: CLIENT_TOOLS }),
      );
      expect(noMessages.status).toBe(400);
      expect(noMessages.message).toContain("messages");
    });
  });
});

describe("the agent endpoint: expiry", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000, snapshotTtlSeconds: 1 } },
          mcpServers: {},
          http: { tokens: [{ name: "alice", token: ALICE }] },
          agent: { upstream: { baseUrl: upstream.baseUrl } },
        }),
      ).configPath,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it("lets a run waiting for client tools expire; late results are refused and say why", async () => {
    const openai = client(gateway);
    upstream.script({
      toolCalls: [
        { name: "exec", arguments: { code: 'return await tools.select_file({ pattern: "late" })' } },
      ],
    });
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "slow user" }];
    const first = await openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS });
    const call = first.choices[0]!.message.tool_calls![0]!;
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: '"late.md"' });
    const late = await apiError(
      openai.chat.completions.create({ model: "m", messages, tools: CLIENT_TOOLS }),
    );
    expect(late.status).toBe(409);
    expect(late.message).toContain("expired");
    expect(upstream.bodies).toHaveLength(1);
  });
});
