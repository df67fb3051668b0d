// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references

import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type {
  FunctionTool,
  Response,
  ResponseCreateParamsNonStreaming,
  ResponseInputItem,
} from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { heldReply, lastToolResult, rejectionOf } from "./support/agent-endpoint.js";
import { redisSnapshotStore } from "./support/replicas.js";

const TOKEN = "agent-replica-token-0123456789";
const OTHER_TOKEN = "agent-replica-other-token-0123456789";
const SECRET = "agent-replica-integrity-secret-0123456789abcdef";
const TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "lookup_order",
      description: "Look an order up in the app's database.",
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    },
  },
];

if (redisSkipReason) console.warn(redisSkipReason);

// Two `codecell serve --http` processes on one real redis-server, without sticky sessions: each request
// of a conversation goes to the other replica, and the run and the hidden transcript follow it.
describe.skipIf(redisSkipReason !== null)("agent endpoint replicas on one Redis", () => {
  let redis: RunningRedis;
  let upstream: ScriptedUpstream;
  const replicas: HttpGateway[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    upstream = await startScriptedUpstream();
    const configPath = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
        mcpServers: {},
        http: {
          tokens: [
            { name: "alice", token: TOKEN },
            { name: "bob", token: OTHER_TOKEN },
          ],
        },
        snapshotStore: redisSnapshotStore("agent:"),
        agent: { upstream: { baseUrl: upstream.baseUrl } },
      }),
    ).configPath;
    const env = { REDIS_URL: redis.url, CODECELL_SNAPSHOT_SECRET: SECRET };
    replicas.push(
      ...(await Promise.all([startHttpGateway(configPath, { env }), startHttpGateway(configPath, { env })])),
    );
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await upstream?.close();
    await redis?.stop();
  });

  const clientOf = (replica: HttpGateway, token = TOKEN) =>
    new OpenAI({ baseURL: `${replica.url}v1`, apiKey: token, maxRetries: 0 });

  it("refuses a request on one replica while the other answers the same conversation, and keeps its answer", async () => {
    const [a, b] = replicas.map((replica) => clientOf(replica)) as [OpenAI, OpenAI];
    upstream.bodies.length = 0;
    const held = heldReply({ text: "Answered on A." });
    upstream.script(
      { toolCalls: [{ name: "exec", arguments: { code: 'text("ran on A"); return 1' } }] },
      held.step,
      { text: "Answered on B." },
    );
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "busy across replicas" }];
    const first = a.chat.completions.create({ model: "m", messages, tools: TOOLS });
    await held.reached;
    // The same visible messages on the other replica: the conversation is taken in the shared store.
    const busy = await rejectionOf(
      b.chat.completions.create({ model: "m", messages, tools: TOOLS }),
      OpenAI.APIError,
    );
    expect(busy.status).toBe(409);
    expect(upstream.bodies).toHaveLength(2);
    held.release();
    expect((await first).choices[0]?.message.content).toBe("Answered on A.");
    const next = await b.chat.completions.create({
      model: "m",
      messages: [
        ...messages,
        { role: "assistant", content: "Answered on A." },
        { role: "user", content: "and?" },
      ],
      tools: TOOLS,
    });
    expect(next.choices[0]?.message.content).toBe("Answered on B.");
    const roles = (upstream.bodies[2]!.messages as Array<{ role: string }>).map((message) => message.role);
    expect(roles).toEqual(["user", "assistant", "tool", "assistant", "user"]);
  });

  for (const stream of [false, true]) {
    it(`resumes a run on the other replica and keeps the transcript there (${stream ? "streaming" : "not streaming"})`, async () => {
      const [a, b] = replicas.map((replica) => clientOf(replica)) as [OpenAI, OpenAI];
      upstream.bodies.length = 0;
      upstream.script(
        {
          toolCalls: [
            {
              name: "exec",
              arguments: {
                code: 'const order = await tools.lookup_order({ id: "A-7" }); text("found"); return order.total * 2;',
              },
            },
          ],
        },
        (body) => ({ text: `Twice the total is ${lastToolResult(body).value}.` }),
        { text: "Anything else?" },
      );
      const ask = async (client: OpenAI, messages: ChatCompletionMessageParam[]) => {
        if (!stream)
          return (await client.chat.completions.create({ model: "m", messages, tools: TOOLS })).choices[0]!;
        const final = await client.chat.completions
          .stream({ model: "m", messages, tools: TOOLS })
          .finalChatCompletion();
        return final.choices[0]!;
      };
      const messages: ChatCompletionMessageParam[] = [
        { role: "user", content: `order A-7, streaming ${stream}` },
      ];
      const first = await ask(a, messages);
      expect(first.finish_reason).toBe("tool_calls");
      const call = first.message.tool_calls![0]!;
      messages.push(
        { role: "assistant", content: first.message.content, tool_calls: first.message.tool_calls },
        { role: "tool", tool_call_id: call.id, content: JSON.stringify({ total: 21 }) },
      );
      const second = await ask(b, messages);
      expect(second.message.content).toBe("Twice the total is 42.");
      expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
        output: [{ type: "text", text: "found" }],
      });
      messages.push({ role: "assistant", content: second.message.content }, { role: "user", content: "no" });
      const third = await ask(a, messages);
      expect(third.message.content).toBe("Anything else?");
      // Replica A never saw the resume, yet sends the model its hidden exec call and result.
      const roles = (upstream.bodies[2]!.messages as Array<{ role: string }>).map((message) => message.role);
      expect(roles).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    });
  }

  // The Responses front: a run handed out on one replica is resumed on the other, whether the client
  // names the stored response (previous_response_id) or sends the whole conversation (store: false).
  const SELECT_FILE: FunctionTool = {
    type: "function",
    name: "select_file",
    description: "Ask the user to pick a file in the editor.",
    parameters: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
    strict: false,
  };
  const PICK_CELL =
    'const picked = await tools.select_file({ pattern: "*.md" }); text("picked " + picked.path); return picked.path.length;';

  /** One Responses request, streamed (the stream's final response) or not. */
  async function respond(
    client: OpenAI,
    params: ResponseCreateParamsNonStreaming,
    stream: boolean,
  ): Promise<Response> {
    if (!stream) return client.responses.create(params);
    let final: Response | null = null;
    for await (const event of await client.responses.create({ ...params, stream: true })) {
      if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
    }
    if (!final) throw new Error("the stream ended without a response");
    return final;
  }

  const textOf = (response: Response) =>
    response.output
      .flatMap((item) => (item.type === "message" ? item.content : []))
      .map((part) => (part.type === "output_text" ? part.text : ""))
      .join("");

  /** An API error's status and message with `id` written as `<id>`, to compare with another id's. */
  const errorOf = async (promise: Promise<unknown>, id: string) => {
    const error = await rejectionOf(promise, OpenAI.APIError);
    return { status: error.status, message: error.message.split(id).join("<id>") };
  };

  for (const stream of [false, true]) {
    for (const follow of ["previous_response_id", "store: false"] as const) {
      it(`resumes a Responses run handed out on one replica on the other, by ${follow} (${stream ? "streaming" : "not streaming"})`, async () => {
        const [a, b] = replicas.map((replica) => clientOf(replica)) as [OpenAI, OpenAI];
        const other = clientOf(replicas[1]!, OTHER_TOKEN);
        upstream.bodies.length = 0;
        upstream.script(
          { text: "Let me ask.", toolCalls: [{ name: "exec", arguments: { code: PICK_CELL } }] },
          (body) => ({ text: `The name has ${lastToolResult(body).value} characters.` }),
        );
        const store = follow === "previous_response_id";
        const input: ResponseInputItem[] = [
          { role: "user", content: `pick a file, ${follow}, streaming ${stream}` },
        ];
        const first = await respond(a, { model: "m", input, tools: [SELECT_FILE], store }, stream);
        expect(first.output.map((item) => item.type)).toEqual(["message", "function_call"]);
        const call = first.output[1]!;
        if (call.type !== "function_call") throw new Error("not a function call");
        expect(call.name).toBe("select_file");
        expect(JSON.parse(call.arguments)).toEqual({ pattern: "*.md" });
        expect(upstream.bodies).toHaveLength(1);
        const result: ResponseInputItem = {
          type: "function_call_output",
          call_id: call.call_id,
          output: '{"path":"NOTES.md"}',
        };
        const followUp: ResponseCreateParamsNonStreaming = store
          ? { model: "m", previous_response_id: first.id, input: [result], tools: [SELECT_FILE] }
          : {
              model: "m",
              input: [...input, ...(first.output as ResponseInputItem[]), result],
              tools: [SELECT_FILE],
              store: false,
            };

        // Another principal on the other replica cannot go on with it: it hears what an id nobody
        // handed out gets, and the run stays where it was.
        if (store) {
          const unknown = "resp_000000000000000000000000";
          expect(await errorOf(respond(other, followUp, stream), first.id)).toEqual(
            await errorOf(respond(b, { ...followUp, previous_response_id: unknown }, stream), unknown),
          );
          expect(await errorOf(other.responses.retrieve(first.id), first.id)).toEqual(
            await errorOf(b.responses.retrieve(unknown), unknown),
          );
        } else {
          const unknown = "call_never_handed_out";
          const made = (followUp.input as ResponseInputItem[]).map((item) =>
            "call_id" in item ? { ...item, call_id: unknown } : item,
          );
          expect(await errorOf(respond(other, followUp, stream), call.call_id)).toEqual(
            await errorOf(respond(b, { ...followUp, input: made }, stream), unknown),
          );
        }
        expect(upstream.bodies).toHaveLength(1);

        const second = await respond(b, followUp, stream);
        expect(textOf(second)).toBe("The name has 8 characters.");
        expect(second.status).toBe("completed");
        // The model read the cell's text and value from the client's result, on the other replica.
        expect(lastToolResult(upstream.bodies[1]!)).toMatchObject({
          status: "completed",
          value: 8,
          output: [{ type: "text", text: "picked NOTES.md" }],
        });
        expect(upstream.bodies).toHaveLength(2);

        if (store) {
          // Stored responses are in the shared store: each replica answers GET for the other's.
          expect((await b.responses.retrieve(first.id)).output).toEqual(first.output);
          expect((await a.responses.retrieve(second.id)).output).toEqual(second.output);
        } else {
          const kept = await errorOf(a.responses.retrieve(second.id), second.id);
          expect(kept.status).toBe(404);
        }
      });
    }
  }
});
