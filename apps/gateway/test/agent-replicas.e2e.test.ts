// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references

import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningRedis, redisSkipReason, startRedisServer } from "../../../scripts/redis-server.mjs";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { heldReply, lastToolResult, rejectionOf } from "./support/agent-endpoint.js";
import { redisSnapshotStore } from "./support/replicas.js";

const TOKEN = "agent-replica-token-0123456789";
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
        http: { tokens: [{ name: "alice", token: TOKEN }] },
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

  const clientOf = (replica: HttpGateway) =>
    new OpenAI({ baseURL: `${replica.url}v1`, apiKey: TOKEN, maxRetries: 0 });

  it("refuses a request on one replica while the other answers the same conversation, and keeps its answer", async () => {
    const [a, b] = replicas.map(clientOf) as [OpenAI, OpenAI];
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
      const [a, b] = replicas.map(clientOf) as [OpenAI, OpenAI];
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
});
