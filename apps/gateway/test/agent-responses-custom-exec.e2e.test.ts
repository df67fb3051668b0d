import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// agent.upstream.execAsCustomTool: a Responses upstream is offered exec as a custom tool whose input
// is the cell itself (no grammar), so the model writes code without escaping it into JSON. The
// scripted Responses upstream is the only fake; the client is the official openai package.

const ALICE = "agent-alice-token-0123456789";
type Item = Record<string, unknown>;
const inputItems = (body: Record<string, unknown> | undefined) => (body?.input ?? []) as Item[];
/** A cell with quotes, a backslash and newlines: what JSON arguments would have had to escape. */
const CELL = [
  'const picked = await tools.select_file({ pattern: "*.md" });',
  'text("picked \\"" + picked.path + "\\"");',
  "return picked;",
].join("\n");

describe("the agent endpoint with exec as a custom tool on a Responses upstream", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "responses" });
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
          mcpServers: {},
          http: { tokens: [{ name: "alice", token: ALICE }] },
          agent: {
            upstream: {
              api: "responses",
              baseUrl: upstream.baseUrl,
              apiKey: "k",
              timeoutMs: 2500,
              execAsCustomTool: true,
            },
            maxModelTurns: 4,
          },
        }),
      ).configPath,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it("sends exec as a grammar-free custom tool, runs the cell the model wrote as its input, and carries the call back as custom tool items", async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
    const tools: ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "select_file",
          description: "Pick a file.",
          parameters: { type: "object", properties: { pattern: { type: "string" } } },
        },
      },
    ];
    upstream.script({ toolCalls: [{ name: "exec", arguments: CELL, custom: true }] }, (body) => {
      const output = inputItems(body).find((item) => item.type === "custom_tool_call_output");
      return { text: String(output?.output) };
    });
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "pick one" }];
    const first = await openai.chat.completions.create({ model: "m", messages, tools });
    const call = first.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && call.function.name).toBe("select_file");
    // exec is a custom tool without a format (free text), wait a function tool: exactly the two.
    const offered = upstream.bodies[0]!.tools as Item[];
    expect(offered.map((tool) => [tool.type, tool.name])).toEqual([
      ["custom", "exec"],
      ["function", "wait"],
    ]);
    expect(offered[0]!.format).toBeUndefined();
    messages.push(first.choices[0]!.message, {
      role: "tool",
      tool_call_id: call.id,
      content: JSON.stringify({ path: "README.md" }),
    });
    const second = await openai.chat.completions.create({ model: "m", messages, tools, stream: true });
    let text = "";
    for await (const chunk of second) text += chunk.choices[0]?.delta.content ?? "";
    // The hidden call went back as the cell the model wrote, byte for byte, with its output beside it.
    const items = inputItems(upstream.bodies[1]);
    const sent = items.find((item) => item.type === "custom_tool_call");
    expect(sent).toMatchObject({ name: "exec", input: CELL });
    expect(items.some((item) => item.type === "function_call")).toBe(false);
    const result = JSON.parse(text) as { value: unknown; output: Array<{ text: string }> };
    expect(result.value).toEqual({ path: "README.md" });
    expect(result.output[0]!.text).toBe('picked "README.md"');
  });
});
