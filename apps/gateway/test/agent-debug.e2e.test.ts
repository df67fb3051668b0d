import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway, until } from "./harness.js";

const UPSTREAM_KEY = "sk-upstream-0123456789abcdef";
const linesOf = (text: string, tag: string) =>
  text.split("\n").filter((line) => line.startsWith(`[codecell:${tag}]`));

/** One gateway with the model transport's debug switches set, and a request through each of its paths. */
async function withSwitches(env: Record<string, string>, upstream: ScriptedUpstream): Promise<HttpGateway> {
  return startHttpGateway(
    makeSetup(
      baseConfig({
        mcpServers: {},
        agent: { upstream: { baseUrl: upstream.baseUrl, apiKey: UPSTREAM_KEY } },
      }),
    ).configPath,
    {
      env: {
        CODECELL_DEBUG_CODE_MODE: "",
        CODECELL_DEBUG_MODEL_PAYLOAD: "",
        CODECELL_DEBUG_MODEL_TRANSPORT: "",
        CODECELL_DEBUG_SSE: "",
        ...env,
      },
    },
  );
}

const TOOLS = [
  {
    type: "function" as const,
    function: { name: "ping", description: "Ping the app.", parameters: { type: "object", properties: {} } },
  },
];

describe("the agent endpoint's debug switches on the real upstream transport", () => {
  let upstream: ScriptedUpstream;
  const gateways: HttpGateway[] = [];
  beforeAll(async () => {
    upstream = await startScriptedUpstream();
  });
  afterAll(async () => {
    for (const gateway of gateways) await gateway.stop();
    await upstream?.close();
  });

  it("PAYLOAD=tools shows the tool names sent upstream; TRANSPORT=1 each request and answer; SSE=peek five events", async () => {
    const gateway = await withSwitches(
      {
        CODECELL_DEBUG_MODEL_PAYLOAD: "tools",
        CODECELL_DEBUG_MODEL_TRANSPORT: "1",
        CODECELL_DEBUG_SSE: "peek",
      },
      upstream,
    );
    gateways.push(gateway);
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: "unused", maxRetries: 0 });
    upstream.script({ text: "a streamed answer in many small pieces" });
    const stream = openai.chat.completions.stream({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      tools: TOOLS,
    });
    expect((await stream.finalChatCompletion()).choices[0]?.message.content).toBe(
      "a streamed answer in many small pieces",
    );
    await until(() => linesOf(gateway.output(), "sse").length >= 5, "five SSE debug lines");
    const output = gateway.output();
    expect(linesOf(output, "payload")).toEqual([expect.stringContaining("upstream #1 tools: exec, wait")]);
    const transport = linesOf(output, "transport");
    expect(
      transport.some((line) =>
        /upstream #1 POST http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions -> 200/.test(line),
      ),
    ).toBe(true);
    const sse = linesOf(output, "sse").filter((line) => line.includes("upstream event"));
    // Peek: the first five events with their data, then nothing more for that stream.
    expect(sse).toHaveLength(5);
    expect(sse[1]).toContain('"content":"a st"');
    expect(output).not.toContain(UPSTREAM_KEY);
  });

  it("PAYLOAD=full-redacted shows the whole body with secrets redacted; SSE=events one line per event", async () => {
    const gateway = await withSwitches(
      { CODECELL_DEBUG_MODEL_PAYLOAD: "full-redacted", CODECELL_DEBUG_SSE: "events" },
      upstream,
    );
    gateways.push(gateway);
    const openai = new OpenAI({ baseURL: `${gateway.url}v1`, apiKey: "unused", maxRetries: 0 });
    upstream.script({ text: "ok" });
    await openai.chat.completions
      .stream({
        model: "m",
        messages: [{ role: "user", content: "hello" }],
        tools: TOOLS,
        metadata: { api_key: "sk-should-not-show" },
      })
      .finalChatCompletion();
    // The gateway's stderr reaches this process through a pipe, apart from the HTTP answer: wait for
    // the last event's line before counting.
    const upstreamEvents = () =>
      linesOf(gateway.output(), "sse").filter((line) => line.includes("upstream event"));
    await until(
      () => linesOf(gateway.output(), "payload").length >= 1 && upstreamEvents().length >= 5,
      "the payload line and five SSE event lines",
    );
    const payload = linesOf(gateway.output(), "payload");
    expect(payload).toHaveLength(1);
    expect(payload[0]).toContain('"messages":[{"role":"user","content":"hello"}]');
    expect(payload[0]).toContain('"name":"exec"');
    expect(payload[0]).toContain('"api_key":"[redacted]"');
    expect(gateway.output()).not.toContain("sk-should-not-show");
    const events = upstreamEvents();
    // role, "ok", finish, usage and [DONE]: every event, without data.
    expect(events.length).toBe(5);
    expect(events.every((line) => /upstream event \d+: \d+ bytes$/.test(line))).toBe(true);
  });
});
