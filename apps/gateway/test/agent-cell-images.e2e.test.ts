import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// A cell's image(...) reaches the upstream model in its API's own image form, inside (or, for Chat
// Completions, right after) the hidden exec result; the client sees only what the model says.

const ALICE = "agent-alice-token-0123456789";
const everything = { package: "@modelcontextprotocol/server-everything", args: ["stdio"] };
const CELL = `const shot = await MCP.everything.get_tiny_image({}); image(shot); return "shown";`;

type Body = Record<string, unknown>;
type Part = Record<string, unknown>;
type Api = "chat-completions" | "messages" | "responses";
type Shown = { text: string; images: Array<{ mimeType: string; data: string }> };

const isPng = (data: string) => Buffer.from(data, "base64").subarray(1, 4).toString("latin1") === "PNG";
const fromDataUrl = (url: unknown) => {
  const match = /^data:([^;,]+);base64,(.+)$/.exec(String(url));
  if (!match) throw new Error(`not a base64 data URL: ${String(url).slice(0, 40)}`);
  return { mimeType: match[1]!, data: match[2]! };
};

/** The last exec result of an upstream body, as each API carries it: its text and its images. */
const shownBy: Record<Api, (body: Body) => Shown> = {
  "chat-completions": (body) => {
    const messages = (body.messages ?? []) as Array<{ role: string; content: unknown }>;
    const at = messages.findLastIndex((message) => message.role === "tool");
    // The tool message holds text only; the images come in the user message right after the tools.
    const after = messages[at + 1];
    const parts = after?.role === "user" && Array.isArray(after.content) ? (after.content as Part[]) : [];
    return {
      text: String(messages[at]?.content),
      images: parts
        .filter((part) => part.type === "image_url")
        .map((part) => fromDataUrl((part.image_url as { url?: unknown }).url)),
    };
  },
  messages: (body) => {
    const blocks = ((body.messages ?? []) as Array<{ content: unknown }>).flatMap((message) =>
      Array.isArray(message.content) ? (message.content as Part[]) : [],
    );
    const result = blocks.filter((block) => block.type === "tool_result").at(-1);
    const content = Array.isArray(result?.content) ? (result.content as Part[]) : [];
    return {
      text: content.find((block) => block.type === "text")?.text as string,
      images: content
        .filter((block) => block.type === "image")
        .map((block) => {
          const source = block.source as { type: string; media_type: string; data: string };
          expect(source.type).toBe("base64");
          return { mimeType: source.media_type, data: source.data };
        }),
    };
  },
  responses: (body) => {
    const output = ((body.input ?? []) as Part[])
      .filter((item) => item.type === "function_call_output")
      .at(-1)?.output;
    const parts = Array.isArray(output) ? (output as Part[]) : [];
    return {
      text: parts.find((part) => part.type === "input_text")?.text as string,
      images: parts.filter((part) => part.type === "input_image").map((part) => fromDataUrl(part.image_url)),
    };
  },
};

// Code mode drives a request that offers tools; the cell does not call this one.
const TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "select_file",
      description: "Ask the user to pick a file in the editor.",
      parameters: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
    },
  },
];

function openaiClient(gateway: HttpGateway): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: ALICE, maxRetries: 0 });
}

function imagesGateway(upstream: ScriptedUpstream, api: Api, images: boolean): Promise<HttpGateway> {
  return startHttpGateway(
    makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 5000, images, maxOutputBytes: 1_048_576 } },
        mcpServers: { everything },
        http: { tokens: [{ name: "alice", token: ALICE }] },
        agent: {
          upstream: { api, baseUrl: upstream.baseUrl, apiKey: "upstream-key-123", timeoutMs: 2500 },
          maxModelTurns: 4,
        },
      }),
    ).configPath,
  );
}

describe.each<Api>(["chat-completions", "messages", "responses"])("image() on a %s upstream", (api) => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api });
    gateway = await imagesGateway(upstream, api, true);
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
  });

  it("gives the model the cell's image in the API's own form, and again on a later turn", async () => {
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: CELL } }] }, { text: "A tiny image." });
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "show me the tiny image" }];
    const first = await openaiClient(gateway).chat.completions.create({ model: "m", messages, tools: TOOLS });
    expect(first.choices[0]!.message.content).toBe("A tiny image.");
    expect(upstream.bodies).toHaveLength(2);

    const shown = shownBy[api](upstream.bodies[1]!);
    expect(shown.images).toHaveLength(1);
    expect(shown.images[0]!.mimeType).toBe("image/png");
    expect(isPng(shown.images[0]!.data)).toBe(true);
    // The text beside it names the image by type and size; the data travels only as the image.
    const text = JSON.parse(shown.text) as { status: string; value: unknown; output: unknown[] };
    expect(text).toMatchObject({ status: "completed", value: "shown" });
    expect(text.output).toEqual([
      { type: "image", mimeType: "image/png", bytes: shown.images[0]!.data.length },
    ]);
    expect(shown.text).not.toContain(shown.images[0]!.data);
    // The client is answered only what the model said: no image data reaches it.
    expect(JSON.stringify(first)).not.toContain(shown.images[0]!.data.slice(0, 64));

    // The next turn of the conversation sends the hidden exec result, image and all, again.
    upstream.script({ text: "Still a tiny image." });
    messages.push({ role: "assistant", content: "A tiny image." }, { role: "user", content: "and now?" });
    const second = await openaiClient(gateway).chat.completions.create({
      model: "m",
      messages,
      tools: TOOLS,
    });
    expect(second.choices[0]!.message.content).toBe("Still a tiny image.");
    expect(shownBy[api](upstream.bodies[2]!).images).toEqual(shown.images);
  });
});

describe("image() with tools.codeMode.images off", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "messages" });
    gateway = await imagesGateway(upstream, "messages", false);
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it("is refused in the cell with an error naming the setting, and no image reaches the model", async () => {
    upstream.script({ toolCalls: [{ name: "exec", arguments: { code: CELL } }] }, { text: "No image." });
    await openaiClient(gateway).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "show me the tiny image" }],
      tools: TOOLS,
    });
    const blocks = ((upstream.bodies[1]!.messages ?? []) as Array<{ content: unknown }>).flatMap((message) =>
      Array.isArray(message.content) ? (message.content as Part[]) : [],
    );
    const result = blocks.find((block) => block.type === "tool_result")!;
    expect(typeof result.content).toBe("string");
    expect(JSON.parse(String(result.content))).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(String(result.content)).toContain("tools.codeMode.images: true");
    expect(JSON.stringify(upstream.bodies[1])).not.toContain('"image"');
  });
});
