import { createOpenAI } from "@ai-sdk/openai";
import { FINISH_REASONS, type FinishReason, type WireApi } from "@codecell/agent";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { Agent, tool as agentTool, OpenAIProvider, Runner, setTracingDisabled } from "@openai/agents";
import { generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import type { FunctionTool, ResponseInputItem } from "openai/resources/responses/responses";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import {
  heldReply,
  lastToolResult,
  rejectionOf,
  upstreamMessages,
  upstreamToolNames,
} from "./support/agent-endpoint.js";

// The OpenAI Responses API front (POST /v1/responses) on both upstream kinds, with the real clients
// that speak it by default: the openai package, the OpenAI Agents SDK and the AI SDK's openai(model).
// The scripted upstream is the only fake.

const ALICE = "agent-alice-token-0123456789";
const BOB = "agent-bob-token-0123456789abc";

const SELECT_FILE: FunctionTool = {
  type: "function",
  name: "select_file",
  description: "Ask the user to pick a file in the editor.",
  parameters: {
    type: "object",
    properties: { pattern: { type: "string" } },
    required: ["pattern"],
    additionalProperties: false,
  },
  strict: true,
};
const PICK_CELL =
  'const picked = await tools.select_file({ pattern: "*.md" }); text("picked " + picked.path); return picked;';

type Body = Record<string, unknown>;
/** Tool names of an upstream body in either API (Chat Completions functions or Messages tools). */
const toolNames = (body: Body | undefined) =>
  ((body?.tools ?? []) as Array<{ name?: string; function?: { name: string } }>).map(
    (entry) => entry.function?.name ?? entry.name,
  );

function client(gateway: HttpGateway, token = ALICE, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: token, maxRetries: 0, defaultHeaders: headers });
}

const apiError = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);

setTracingDisabled(true);

describe("the agent endpoint: POST /v1/responses", () => {
  let upstream: ScriptedUpstream;
  let messagesUpstream: ScriptedUpstream;
  let gateway: HttpGateway;
  /** On a Messages API upstream, with hosted tools refused (agent.hostedTools "refuse"). */
  let onMessages: HttpGateway;
  let off: HttpGateway;

  beforeAll(async () => {
    [upstream, messagesUpstream] = await Promise.all([
      startScriptedUpstream(),
      startScriptedUpstream({ api: "messages", models: ["claude-a", "claude-b"] }),
    ]);
    const http = {
      tokens: [
        { name: "alice", token: ALICE },
        { name: "bob", token: BOB },
      ],
    };
    const tools = { codeMode: { enabled: true, timeoutMs: 3000 }, deny: ["core:codecell:write_file"] };
    const agentOn = (target: ScriptedUpstream, extra: Record<string, unknown> = {}) => ({
      upstream: { baseUrl: target.baseUrl, apiKey: "upstream-key-123", timeoutMs: 2500, ...extra },
      maxModelTurns: 4,
    });
    [gateway, onMessages, off] = await Promise.all([
      startHttpGateway(
        makeSetup(baseConfig({ tools, http, agent: agentOn(upstream, { model: "m-default" }) })).configPath,
      ),
      startHttpGateway(
        makeSetup(
          baseConfig({
            tools,
            http,
            mcpServers: {},
            agent: { ...agentOn(messagesUpstream, { api: "messages" }), hostedTools: "refuse" },
          }),
        ).configPath,
      ),
      startHttpGateway(
        makeSetup(baseConfig({ tools: { codeMode: false }, mcpServers: {}, http, agent: agentOn(upstream) }))
          .configPath,
      ),
    ]);
  });
  afterAll(async () => {
    await Promise.all([gateway?.stop(), onMessages?.stop(), off?.stop()]);
    await Promise.all([upstream?.close(), messagesUpstream?.close()]);
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
    messagesUpstream.bodies.length = 0;
  });

  describe("with the openai client", () => {
    it("hands a client tool out as a function_call item, and its function_call_output after previous_response_id resumes the cell", async () => {
      const openai = client(gateway);
      upstream.script(
        { text: "Let me ask.", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
        (body) => ({ text: `Cell said: ${JSON.stringify(lastToolResult(body))}` }),
        { text: "Still here." },
      );
      const first = await openai.responses.create({
        model: "m",
        instructions: "You edit files.",
        input: "open the readme",
        tools: [SELECT_FILE],
      });
      expect(first.object).toBe("response");
      expect(first.id).toMatch(/^resp_/);
      expect(first.output.map((item) => item.type)).toEqual(["message", "function_call"]);
      expect(first.output_text).toBe("Let me ask.");
      const call = first.output[1]!;
      if (call.type !== "function_call") throw new Error("not a function call");
      expect(call.name).toBe("select_file");
      expect(JSON.parse(call.arguments)).toEqual({ pattern: "*.md" });
      // The run suspended at once: one upstream call, which offered exactly exec and wait.
      expect(upstream.bodies).toHaveLength(1);
      expect(upstreamToolNames(upstream.bodies[0])).toEqual(["exec", "wait"]);
      expect(upstreamMessages(upstream.bodies[0])[0]).toEqual({ role: "system", content: "You edit files." });

      const second = await openai.responses.create({
        model: "m",
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: '{"path":"README.md"}' }],
        tools: [SELECT_FILE],
      });
      expect(second.output_text).toContain("picked README.md");
      expect(second.previous_response_id).toBe(first.id);
      // The model saw its own exec and the cell's result, never the client's select_file call.
      const resumed = upstreamMessages(upstream.bodies[1]);
      expect(resumed.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
        status: "completed",
        value: { path: "README.md" },
      });
      expect(upstreamToolNames(upstream.bodies[1])).toEqual(["exec", "wait"]);

      // A new user turn after the last response id: the hidden exec turns go upstream again.
      const third = await openai.responses.create({
        model: "m",
        previous_response_id: second.id,
        input: "and now?",
        tools: [SELECT_FILE],
      });
      expect(third.output_text).toBe("Still here.");
      const next = upstreamMessages(upstream.bodies[2]);
      expect(next.map((message) => message.role)).toEqual([
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
      ]);
      expect(JSON.stringify(next[2])).toContain("tools.select_file");

      // Stored responses: GET returns what the client got, to its own principal only.
      expect((await openai.responses.retrieve(first.id)).output).toEqual(first.output);
      expect((await apiError(client(gateway, BOB).responses.retrieve(first.id))).status).toBe(404);
      const bobFollows = await apiError(
        client(gateway, BOB).responses.create({
          model: "m",
          previous_response_id: second.id,
          input: "mine now",
          tools: [SELECT_FILE],
        }),
      );
      expect(bobFollows.status).toBe(400);
      expect(bobFollows.message).toContain(second.id);
      expect((await apiError(client(gateway, BOB).responses.delete(first.id))).status).toBe(404);
      await openai.responses.delete(first.id);
      const gone = await apiError(openai.responses.retrieve(first.id));
      expect(gone.status).toBe(404);
      expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
      expect(upstream.bodies).toHaveLength(3);
    });

    it("with store false, matches a client that sends the whole conversation again, and keeps nothing to GET", async () => {
      const openai = client(gateway);
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, (body) => ({
        text: `value ${JSON.stringify(lastToolResult(body).value)}`,
      }));
      const input: ResponseInputItem[] = [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "input_text", text: "pick one" }] },
      ];
      const first = await openai.responses.create({
        model: "m",
        input,
        tools: [SELECT_FILE],
        store: false,
        parallel_tool_calls: false,
        include: ["reasoning.encrypted_content"],
      });
      const call = first.output.find((item) => item.type === "function_call");
      if (call?.type !== "function_call") throw new Error("no function call");
      expect((await apiError(openai.responses.retrieve(first.id))).status).toBe(404);
      const second = await openai.responses.create({
        model: "m",
        input: [
          ...input,
          ...(first.output as ResponseInputItem[]),
          {
            type: "function_call_output",
            call_id: call.call_id,
            output: [{ type: "input_text", text: '{"path":"b.md"}' }],
          },
        ],
        tools: [SELECT_FILE],
        store: false,
      });
      expect(second.output_text).toBe('value {"path":"b.md"}');
      expect(upstreamMessages(upstream.bodies[1]).map((message) => message.role)).toEqual([
        "system",
        "user",
        "assistant",
        "tool",
      ]);
    });

    it("gives custom tools their string input, drops hosted tools with a note, and keeps a client tool named exec apart from codecell's", async () => {
      const openai = client(gateway);
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: `
                  const ids = ALL_TOOLS.map((tool) => tool.id);
                  const patched = await tools.apply_patch({ input: "*** Begin Patch" });
                  const ran = await tools.exec({ cmd: "ls" });
                  return { ids, patched, ran };`,
              },
            },
          ],
        },
        (body) => ({ text: JSON.stringify(lastToolResult(body).value) }),
      );
      const tools = [
        { type: "custom" as const, name: "apply_patch", description: "Apply a patch to the workspace." },
        {
          type: "function" as const,
          name: "exec",
          description: "Run a shell command.",
          parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
          strict: false,
        },
        { type: "web_search" as const },
      ];
      const { data: first, response } = await openai.responses
        .create({ model: "m", input: "patch and list", tools })
        .withResponse();
      expect(response.headers.get("codecell-dropped-tools")).toBe("web_search");
      expect(upstreamToolNames(upstream.bodies[0])).toEqual(["exec", "wait"]);
      expect(first.output.map((item) => item.type)).toEqual(["custom_tool_call"]);
      const patch = first.output[0]!;
      if (patch.type !== "custom_tool_call") throw new Error("not a custom tool call");
      expect(patch).toMatchObject({ name: "apply_patch", input: "*** Begin Patch" });
      const second = await openai.responses.create({
        model: "m",
        previous_response_id: first.id,
        input: [{ type: "custom_tool_call_output", call_id: patch.call_id, output: "patched" }],
        tools,
      });
      const shell = second.output[0]!;
      if (shell.type !== "function_call") throw new Error("not a function call");
      expect(shell).toMatchObject({ name: "exec" });
      expect(JSON.parse(shell.arguments)).toEqual({ cmd: "ls" });
      const third = await openai.responses.create({
        model: "m",
        previous_response_id: second.id,
        input: [{ type: "function_call_output", call_id: shell.call_id, output: '{"error":"denied"}' }],
        tools,
      });
      // The client's failure is a catchable error in the cell: here it ended the cell with that message.
      const result = lastToolResult(upstream.bodies[1]!);
      expect(JSON.stringify(result)).toContain("denied");
      expect(third.output_text).toBeDefined();
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
    });

    for (const stream of [false, true]) {
      it(`hands a freeform tool a client's own code mode declares out as a custom_tool_call with its string input, and the custom_tool_call_output reaches the cell (${stream ? "streaming" : "not streaming"})`, async () => {
        const openai = client(gateway);
        // A Codex-like code mode: an exec whose description declares a freeform patch tool.
        const codeMode = [
          "Run JavaScript; the nested tools are on `tools`.",
          "",
          "### `apply_patch`",
          "Edits files. The input is the patch itself, not JSON.",
          "",
          "exec tool declaration:",
          "```ts",
          "declare const tools: { apply_patch(input: string): Promise<unknown>; };",
          "```",
        ].join("\n");
        const tools = [
          { type: "custom" as const, name: "exec", description: codeMode },
          {
            type: "function" as const,
            name: "wait",
            parameters: { type: "object", properties: {} },
            strict: false,
          },
        ];
        const patch =
          '*** Begin Patch\n*** Update File: "a b.txt"\n-old\n+new \u00e9 {"x": 1}\n*** End Patch';
        upstream.script(
          {
            toolCalls: [
              {
                name: "exec",
                arguments: {
                  code: `const out = await tools.apply_patch({ input: ${JSON.stringify(patch)} }); return { type: typeof out, out };`,
                },
              },
            ],
          },
          (body) => ({ text: JSON.stringify(lastToolResult(body).value) }),
        );
        const ask = async (params: OpenAI.Responses.ResponseCreateParamsNonStreaming) => {
          if (!stream) return { response: await openai.responses.create(params), inputs: [] as string[] };
          const inputs: string[] = [];
          let final: OpenAI.Responses.Response | null = null;
          for await (const event of await openai.responses.create({ ...params, stream: true })) {
            if (event.type === "response.custom_tool_call_input.done") inputs.push(event.input);
            if (event.type === "response.completed") final = event.response;
          }
          if (!final) throw new Error("the stream ended without a response");
          return { response: final, inputs };
        };
        const first = await ask({ model: "m", input: "patch it", tools });
        expect(first.response.output.map((item) => item.type)).toEqual(["custom_tool_call"]);
        const call = first.response.output[0]!;
        if (call.type !== "custom_tool_call") throw new Error("not a custom tool call");
        expect(call).toMatchObject({ name: "apply_patch", input: patch });
        if (stream) expect(first.inputs).toEqual([patch]);
        // The model was offered codecell's exec and wait only, and the client's were left out.
        expect(upstreamToolNames(upstream.bodies[0])).toEqual(["exec", "wait"]);
        const second = await ask({
          model: "m",
          previous_response_id: first.response.id,
          input: [{ type: "custom_tool_call_output", call_id: call.call_id, output: "Done.\nM a b.txt" }],
          tools,
        });
        expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
          status: "completed",
          value: { type: "string", out: "Done.\nM a b.txt" },
        });
        expect(JSON.parse(textOf(second.response))).toEqual({ type: "string", out: "Done.\nM a b.txt" });
        expect(upstream.bodies).toHaveLength(2);
      });
    }

    it("answers errors in the Responses error shape", async () => {
      const openai = client(gateway);
      const unknown = await apiError(
        openai.responses.create({
          model: "m",
          input: "x",
          previous_response_id: "resp_nope",
          tools: [SELECT_FILE],
        }),
      );
      expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
      expect(unknown.message).toContain("resp_nope");
      const badItem = await apiError(
        openai.responses.create({
          model: "m",
          input: [{ type: "bogus_item" } as unknown as ResponseInputItem],
          tools: [SELECT_FILE],
        }),
      );
      expect(badItem.status).toBe(400);
      expect(badItem.message).toContain("input[0]");
      const conversation = await apiError(
        openai.responses.create({ model: "m", input: "x", conversation: "conv_1", tools: [SELECT_FILE] }),
      );
      expect(conversation.message).toContain("previous_response_id");
      const notPending = await apiError(
        openai.responses.create({
          model: "m",
          input: [
            { role: "user", content: "hi" },
            { type: "function_call_output", call_id: "call_never", output: "1" },
          ],
          tools: [SELECT_FILE],
        }),
      );
      expect(notPending.status).toBe(409);
      const broken = await fetch(`${gateway.url}v1/responses/resp_%E0%A4%A`, {
        headers: { authorization: `Bearer ${ALICE}` },
      });
      expect(broken.status).toBe(400);
      expect(((await broken.json()) as { error: { message: string } }).error.message).toContain(
        "percent-encoding",
      );
      expect(
        (await apiError(client(gateway, "wrong-token").responses.create({ model: "m", input: "x" }))).status,
      ).toBe(401);
      expect(upstream.bodies).toHaveLength(0);
    });

    it("passes requests without tools through as one model call, with code mode off too", async () => {
      upstream.script(
        { text: "plain" },
        { toolCalls: [{ name: "select_file", arguments: { pattern: "x" } }] },
      );
      const plain = await client(gateway).responses.create({
        model: "m",
        input: "hi",
        max_output_tokens: 50,
      });
      expect(plain.output_text).toBe("plain");
      expect(upstream.bodies[0]).toMatchObject({ max_completion_tokens: 50 });
      expect(upstream.bodies[0]?.tools).toBeUndefined();
      const direct = await client(off).responses.create({
        model: "m",
        input: "pick",
        tools: [SELECT_FILE],
        tool_choice: "required",
      });
      expect(toolNames(upstream.bodies[1])).toEqual(["select_file"]);
      expect(upstream.bodies[1]).toMatchObject({ tool_choice: "required" });
      expect(direct.output[0]).toMatchObject({ type: "function_call", name: "select_file" });
    });
  });

  describe("streaming", () => {
    it("streams the Responses events the openai client's stream helper and create({ stream: true }) read", async () => {
      const openai = client(gateway);
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
      const deltas: string[] = [];
      const helper = openai.responses.stream({ model: "m", input: "stream it", tools: [SELECT_FILE] });
      helper.on("response.output_text.delta", (event) => deltas.push(event.delta));
      const first = await helper.finalResponse();
      expect(deltas.join("")).toBe("Checking the files.");
      expect(deltas.length).toBeGreaterThan(1);
      expect(first.output_text).toBe("Checking the files.");
      const calls = first.output.filter((item) => item.type === "function_call");
      expect(calls.map((call) => JSON.parse(call.arguments))).toEqual([{ pattern: "a" }, { pattern: "b" }]);
      expect(first.usage).toMatchObject({ input_tokens: 100, output_tokens: 20, total_tokens: 120 });
      expect(upstream.bodies[0]).toMatchObject({ stream: true });
      // The stream's final response is the stored one.
      const stored = await openai.responses.retrieve(first.id);
      expect(stored.output.map((item) => item.id)).toEqual(first.output.map((item) => item.id));
      expect(stored.output_text).toBe("Checking the files.");

      const events = [];
      const stream = await openai.responses.create({
        model: "m",
        previous_response_id: first.id,
        input: calls.map((call, index) => ({
          type: "function_call_output" as const,
          call_id: call.call_id,
          output: JSON.stringify(`<${index}>`),
        })),
        tools: [SELECT_FILE],
        stream: true,
      });
      for await (const event of stream) events.push(event);
      expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
      const types = [...new Set(events.map((event) => event.type))];
      expect(types).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
      ]);
      const text = events.flatMap((event) =>
        event.type === "response.output_text.delta" ? [event.delta] : [],
      );
      expect(text.join("")).toBe("Both: <0><1>, streamed in pieces.");
      const completed = events.at(-1);
      if (completed?.type !== "response.completed") throw new Error("no response.completed");
      expect(completed.response.usage).toMatchObject({ input_tokens: 150, output_tokens: 30 });
      expect(completed.response.previous_response_id).toBe(first.id);
    });

    it("streams function_call arguments as delta and done events", async () => {
      upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] });
      const stream = await client(gateway).responses.create({
        model: "m",
        input: "pick",
        tools: [SELECT_FILE],
        stream: true,
      });
      const events = [];
      for await (const event of stream) events.push(event);
      const done = events.find((event) => event.type === "response.function_call_arguments.done");
      if (done?.type !== "response.function_call_arguments.done") throw new Error("no arguments done event");
      expect(JSON.parse(done.arguments)).toEqual({ pattern: "*.md" });
      const delta = events.find((event) => event.type === "response.function_call_arguments.delta");
      expect(delta).toMatchObject({ item_id: done.item_id, delta: done.arguments });
      expect(events.at(-1)?.type).toBe("response.completed");
    });

    it("ends a stream that already started with an error event the openai client raises", async () => {
      upstream.script(
        { text: "Working on it.", toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] },
        { status: 500, body: { error: { message: "upstream fell over" } } },
      );
      const stream = await client(gateway).responses.create({
        model: "m",
        input: "fail later",
        tools: [SELECT_FILE],
        stream: true,
      });
      const seen: string[] = [];
      const failure = await rejectionOf(
        (async () => {
          for await (const event of stream) seen.push(event.type);
        })(),
        OpenAI.APIError,
      );
      expect(seen).toContain("response.output_text.delta");
      expect(failure.message).toContain("upstream fell over");
    });

    it("drives the AI SDK's openai(model) with streamText", async () => {
      const openai = createOpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE });
      const asked: string[] = [];
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: { code: 'const f = await tools.select_file({ pattern: "*.ts" }); return f.path;' },
            },
          ],
        },
        (body) => ({ text: `You picked ${lastToolResult(body).value}.` }),
      );
      const result = streamText({
        model: openai("m-sdk"),
        prompt: "pick a ts file",
        tools: {
          select_file: tool({
            description: "Ask the user to pick a file in the editor.",
            inputSchema: z.object({ pattern: z.string() }),
            execute: async ({ pattern }) => {
              asked.push(pattern);
              return { path: "main.ts" };
            },
          }),
        },
        stopWhen: stepCountIs(4),
      });
      let streamed = "";
      for await (const delta of result.textStream) streamed += delta;
      expect(asked).toEqual(["*.ts"]);
      expect(streamed).toBe("You picked main.ts.");
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
    });
  });

  describe("GET /v1/models", () => {
    it("lists the upstream's models, or the configured model when the upstream has no list", async () => {
      const own = await client(gateway).models.list();
      expect(own.data.map((model) => model.id)).toEqual(["m-default"]);
      const listed = await client(onMessages).models.list();
      expect(listed.data.map((model) => model.id)).toEqual(["claude-a", "claude-b"]);
      expect(listed.data[0]).toMatchObject({ object: "model", display_name: "CLAUDE-A" });
    });
  });

  describe("on a Messages API upstream", () => {
    it("runs the same round trip, with the parameters mapped, and refuses hosted tools when configured to", async () => {
      const openai = client(onMessages);
      messagesUpstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] }, (body) => {
        const blocks = (body.messages as Array<{ content: unknown }>).flatMap((message) =>
          Array.isArray(message.content) ? (message.content as Array<Record<string, unknown>>) : [],
        );
        const result = blocks.filter((block) => block.type === "tool_result").at(-1);
        return { text: `got ${JSON.parse(String(result?.content)).value.path}` };
      });
      const first = await openai.responses.create({
        model: "claude-x",
        instructions: "Be kind.",
        input: "pick",
        tools: [SELECT_FILE],
        max_output_tokens: 77,
        temperature: 0.3,
      });
      expect(messagesUpstream.bodies[0]).toMatchObject({
        system: "Be kind.",
        max_tokens: 77,
        temperature: 0.3,
      });
      expect(toolNames(messagesUpstream.bodies[0])).toEqual(["exec", "wait"]);
      const call = first.output.find((item) => item.type === "function_call");
      if (call?.type !== "function_call") throw new Error("no function call");
      const second = await openai.responses.create({
        model: "claude-x",
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: '{"path":"c.md"}' }],
        tools: [SELECT_FILE],
      });
      expect(second.output_text).toBe("got c.md");
      expect(toolNames(messagesUpstream.bodies[1])).toEqual(["exec", "wait"]);

      const refused = await apiError(
        openai.responses.create({
          model: "claude-x",
          input: "search",
          tools: [SELECT_FILE, { type: "web_search" }],
        }),
      );
      expect(refused.status).toBe(400);
      expect(refused.message).toContain("web_search");
      expect(messagesUpstream.bodies).toHaveLength(2);
    });
  });

  describe("with the agent SDKs", () => {
    it("runs an OpenAI Agents SDK agent: its function tool runs in the client and the cell gets the result", async () => {
      const asked: string[] = [];
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: 'const w = await tools.get_weather({ city: "Oslo" }); return "weather: " + w;',
              },
            },
          ],
        },
        (body) => ({ text: `The cell says ${lastToolResult(body).value}` }),
      );
      const getWeather = agentTool({
        name: "get_weather",
        description: "The weather in a city.",
        parameters: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          asked.push(city);
          return `sunny in ${city}`;
        },
      });
      const agent = new Agent({
        name: "helper",
        instructions: "Help.",
        model: "m-agents",
        tools: [getWeather],
      });
      const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client(gateway) }) });
      const result = await runner.run(agent, "weather in Oslo?");
      expect(asked).toEqual(["Oslo"]);
      expect(result.finalOutput).toBe("The cell says weather: sunny in Oslo");
      // It spoke the Responses API: its last response is stored here.
      expect(result.lastResponseId).toMatch(/^resp_/);
      expect((await client(gateway).responses.retrieve(result.lastResponseId!)).output_text).toBe(
        result.finalOutput,
      );
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
      // The second request resumed the suspended cell rather than starting a new one.
      expect(upstreamMessages(upstream.bodies[1]).map((message) => message.role)).toEqual([
        "system",
        "user",
        "assistant",
        "tool",
      ]);
    });

    it("drives the AI SDK's openai(model) (the Responses API) with generateText", async () => {
      const openai = createOpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE });
      const asked: string[] = [];
      upstream.script(
        {
          text: "Looking.",
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
        model: openai("m-sdk"),
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
      // openai(model) spoke the Responses API.
      expect(result.response.id).toMatch(/^resp_/);
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) expect(upstreamToolNames(body)).toEqual(["exec", "wait"]);
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({ status: "completed" });
    });
  });
});

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

/** How a Responses client reads a response's end: its status, and why when it is incomplete. */
type Ending = { status: string | undefined; reason: string | null; messageStatus: string | null };

const endingOf = (response: OpenAI.Responses.Response): Ending => {
  const message = response.output.find((item) => item.type === "message");
  return {
    status: response.status,
    reason: response.incomplete_details?.reason ?? null,
    messageStatus: message?.type === "message" ? message.status : null,
  };
};

/** What the table says a Responses client reads for an upstream's `word`. */
function expectedEnding(upstreamApi: WireApi, word: string): Ending {
  const written = FINISH_REASONS[readAs(upstreamApi, word)].responses[0]!;
  return written === "completed"
    ? { status: "completed", reason: null, messageStatus: "completed" }
    : { status: "incomplete", reason: written, messageStatus: "incomplete" };
}

const UPSTREAM_APIS: readonly WireApi[] = ["chat-completions", "messages", "responses"];

/** A response's text, as `output_text` gives it (the raw stream's response objects have no such field). */
const textOf = (response: OpenAI.Responses.Response) =>
  response.output
    .flatMap((item) => (item.type === "message" ? item.content : []))
    .map((part) => (part.type === "output_text" ? part.text : ""))
    .join("");

// What the Responses front's answers say on every upstream kind: why the answer ended (the finish-reason
// table's Responses column: a cut-off answer is incomplete), the thread header before the first
// streamed byte, a conversation being answered refused with 409, an upstream's Retry-After, and errors
// in the Responses API's words.
describe("the Responses front's answers, on each upstream kind", () => {
  const upstreams = new Map<WireApi, ScriptedUpstream>();
  const gateways = new Map<WireApi, HttpGateway>();

  beforeAll(async () => {
    for (const api of UPSTREAM_APIS) upstreams.set(api, await startScriptedUpstream({ api }));
    const started = await Promise.all(
      UPSTREAM_APIS.map((api) =>
        startHttpGateway(
          makeSetup(
            baseConfig({
              tools: { codeMode: { enabled: true, timeoutMs: 5000 } },
              mcpServers: {},
              http: { tokens: [{ name: "alice", token: ALICE }] },
              agent: { upstream: { api, baseUrl: upstreams.get(api)!.baseUrl, timeoutMs: 30_000 } },
            }),
          ).configPath,
        ),
      ),
    );
    for (const [index, api] of UPSTREAM_APIS.entries()) gateways.set(api, started[index]!);
  });
  afterAll(async () => {
    await Promise.all([...gateways.values()].map((gateway) => gateway?.stop()));
    for (const upstream of upstreams.values()) await upstream.close();
  });
  beforeEach(() => {
    for (const upstream of upstreams.values()) upstream.bodies.length = 0;
  });

  /** A response streamed through the openai client: its event types, final response and thread header. */
  async function streamed(openai: OpenAI, params: OpenAI.Responses.ResponseCreateParamsNonStreaming) {
    const { data, response } = await openai.responses.create({ ...params, stream: true }).withResponse();
    const types: string[] = [];
    let final: OpenAI.Responses.Response | null = null;
    for await (const event of data) {
      types.push(event.type);
      if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
    }
    if (!final) throw new Error(`the stream ended without a response: ${types.join(", ")}`);
    return { types, final, thread: response.headers.get("codecell-thread") };
  }

  for (const upstreamApi of UPSTREAM_APIS) {
    it(`answers a cut-off answer as incomplete with the table's reason, streamed and not, in code mode and passed through (${upstreamApi} upstream)`, async () => {
      const upstream = upstreams.get(upstreamApi)!;
      const openai = client(gateways.get(upstreamApi)!);
      for (const word of answerWords(upstreamApi)) {
        const expected = expectedEnding(upstreamApi, word);
        for (const stream of [false, true]) {
          for (const codeMode of [true, false]) {
            const where = `${word}, ${stream ? "streamed" : "not streamed"}, ${codeMode ? "code mode" : "passed through"}`;
            upstream.script(
              ...(codeMode ? [{ toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] }] : []),
              { text: `Ended by ${word}.`, finish: word },
            );
            const params = {
              model: "m",
              input: `finish ${where}`,
              ...(codeMode ? { tools: [SELECT_FILE] } : {}),
            };
            let response: OpenAI.Responses.Response;
            if (stream) {
              const { types, final } = await streamed(openai, params);
              // The last event is the one the status names: response.incomplete for a cut-off answer.
              expect({ where, last: types.at(-1) }).toEqual({ where, last: `response.${expected.status}` });
              response = final;
            } else {
              response = await openai.responses.create(params);
            }
            expect({ where, text: textOf(response), ...endingOf(response) }).toEqual({
              where,
              text: `Ended by ${word}.`,
              ...expected,
            });
            // The stored response says the same.
            expect(endingOf(await openai.responses.retrieve(response.id))).toEqual(expected);
          }
        }
      }
    });

    it(`sends the thread header before the first streamed byte (${upstreamApi} upstream)`, async () => {
      const upstream = upstreams.get(upstreamApi)!;
      const openai = client(gateways.get(upstreamApi)!);
      // The model's text streams before the answer ends: the header cannot wait for the end.
      upstream.script(
        { text: "Looking.", toolCalls: [{ name: "exec", arguments: { code: "return 2" } }] },
        { text: "The answer is 2." },
        { text: "Still 2." },
      );
      const first = await streamed(openai, { model: "m", input: "what is 2", tools: [SELECT_FILE] });
      expect(textOf(first.final)).toBe("Looking.\n\nThe answer is 2.");
      expect(first.types.filter((type) => type === "response.output_text.delta").length).toBeGreaterThan(1);
      expect(first.thread).toMatch(/^thread_/);
      // The follow-up goes on in the same thread.
      const { response } = await openai.responses
        .create({ model: "m", input: "again", previous_response_id: first.final.id, tools: [SELECT_FILE] })
        .withResponse();
      expect(response.headers.get("codecell-thread")).toBe(first.thread);
    });

    it(`passes an upstream 429's Retry-After on (${upstreamApi} upstream)`, async () => {
      const upstream = upstreams.get(upstreamApi)!;
      const openai = client(gateways.get(upstreamApi)!);
      for (const tools of [true, false]) {
        for (const stream of [false, true]) {
          upstream.script({
            status: 429,
            body: { error: { type: "rate_limit_error", message: "slow down" } },
            headers: { "retry-after": "7" },
          });
          const limited = await apiError(
            openai.responses.create({
              model: "m",
              input: "hurry",
              stream,
              ...(tools ? { tools: [SELECT_FILE] } : {}),
            }),
          );
          expect({
            tools,
            stream,
            status: limited.status,
            // The client keeps the response headers as a fetch Headers object.
            retryAfter: (limited.headers as Headers | undefined)?.get("retry-after"),
          }).toEqual({ tools, stream, status: 429, retryAfter: "7" });
          expect(limited.message).toContain("slow down");
        }
      }
    });
  }

  it("refuses a second request of a conversation being answered with 409 in the Responses error shape, and loses nothing of the first", async () => {
    const upstream = upstreams.get("chat-completions")!;
    const openai = client(gateways.get("chat-completions")!, ALICE, { "codecell-session": "busy-responses" });
    const held = heldReply({ text: "First answer." });
    upstream.script(
      { toolCalls: [{ name: "exec", arguments: { code: 'text("ran"); return 1' } }] },
      held.step,
      { text: "Second answer." },
    );
    const first = openai.responses.create({ model: "m", input: "one", tools: [SELECT_FILE] });
    await held.reached;
    for (const stream of [false, true]) {
      const busy = await apiError(
        openai.responses.create({ model: "m", input: "something else", tools: [SELECT_FILE], stream }),
      );
      expect(busy.status).toBe(409);
      expect(busy.error).toMatchObject({ type: "invalid_request_error" });
      expect(busy.message).toContain("being answered right now");
    }
    // The refused requests never reached the model.
    expect(upstream.bodies).toHaveLength(2);
    held.release();
    const answered = await first;
    expect(answered.output_text).toBe("First answer.");
    const next = await openai.responses.create({
      model: "m",
      input: "two",
      previous_response_id: answered.id,
      tools: [SELECT_FILE],
    });
    expect(next.output_text).toBe("Second answer.");
    // The model sees the first request's hidden exec call and its result.
    expect(upstreamMessages(upstream.bodies[2]).map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
  });

  it("refuses a second store: false request with the same input while the first streams", async () => {
    const upstream = upstreams.get("responses")!;
    const openai = client(gateways.get("responses")!);
    const held = heldReply({ text: "Streamed answer." });
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: "return 1" } }] }, held.step);
    const input = "same words, store false";
    const first = streamed(openai, { model: "m", input, store: false, tools: [SELECT_FILE] });
    await held.reached;
    const busy = await apiError(
      openai.responses.create({ model: "m", input, store: false, tools: [SELECT_FILE] }),
    );
    expect(busy.status).toBe(409);
    expect(upstream.bodies).toHaveLength(2);
    held.release();
    expect(textOf((await first).final)).toBe("Streamed answer.");
  });

  it("words the loop's errors in Responses terms: function_call_output items, not tool messages", async () => {
    const upstream = upstreams.get("chat-completions")!;
    const openai = client(gateways.get("chat-completions")!);
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] });
    const first = await openai.responses.create({ model: "m", input: "pick one", tools: [SELECT_FILE] });
    const call = first.output.find((item) => item.type === "function_call");
    expect(call).toMatchObject({ name: "select_file" });
    // A new message before the call's result.
    const early = await apiError(
      openai.responses.create({
        model: "m",
        previous_response_id: first.id,
        input: [
          { role: "user", content: "never mind" },
          {
            type: "function_call_output",
            call_id: call?.type === "function_call" ? call.call_id : "",
            output: "{}",
          },
        ],
        tools: [SELECT_FILE],
      }),
    );
    expect(early.status).toBe(400);
    expect(early.message).toContain("function_call_output item");
    expect(early.message).not.toContain('"tool" message');
    // No result at all.
    const missing = await apiError(
      openai.responses.create({
        model: "m",
        previous_response_id: first.id,
        input: [{ role: "user", content: "and now?" }],
        tools: [SELECT_FILE],
      }),
    );
    expect(missing.status).toBe(400);
    expect(missing.message).toContain("function_call items");
    expect(upstream.bodies).toHaveLength(1);
  });
});
