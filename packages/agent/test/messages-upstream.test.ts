import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagesUpstream, type ModelRequest, type TurnMessage } from "../src/index.js";
import { toMessagesWire } from "../src/messages-upstream.js";
import { type ScriptedUpstream, startScriptedUpstream } from "../src/testing/scripted-upstream.js";
import { failure } from "./support.js";

const request = (messages: TurnMessage[], extra: Partial<ModelRequest> = {}): ModelRequest => ({
  model: "claude-test",
  messages,
  tools: [
    { name: "exec", description: "Run a cell.", parameters: { type: "object" } },
    { name: "wait", description: "Wait for a run.", parameters: { type: "object" } },
  ],
  codeModeDirectOnly: [],
  params: {},
  ...extra,
});

describe("toMessagesWire", () => {
  it("lifts system messages, turns tool results into leading tool_result blocks and merges turns", () => {
    const wire = toMessagesWire([
      { role: "system", content: "Rule one." },
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: "Running.",
        toolCalls: [
          { id: "toolu_a", name: "exec", arguments: '{"code":"return 1"}' },
          { id: "toolu_b", name: "exec", arguments: "not json" },
        ],
      },
      { role: "tool", toolCallId: "toolu_a", content: '{"status":"completed"}' },
      { role: "tool", toolCallId: "toolu_b", content: "boom", isError: true },
      { role: "system", content: [{ type: "text", text: "Rule two." }] },
      { role: "user", content: "and then?" },
      { role: "assistant", content: null },
      { role: "user", content: "still there?" },
    ]);
    expect(wire.system).toBe("Rule one.\n\nRule two.");
    expect(wire.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "go" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Running." },
          { type: "tool_use", id: "toolu_a", name: "exec", input: { code: "return 1" } },
          { type: "tool_use", id: "toolu_b", name: "exec", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_a", content: '{"status":"completed"}' },
          { type: "tool_result", tool_use_id: "toolu_b", content: "boom", is_error: true },
          { type: "text", text: "and then?" },
          { type: "text", text: "still there?" },
        ],
      },
    ]);
  });

  it("translates Chat Completions image parts and refuses parts it cannot carry", () => {
    const { messages } = toMessagesWire([
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,AAAA" } },
          { type: "image_url", image_url: { url: "https://example.com/a.png" } },
        ],
      },
    ]);
    expect(messages[0]!.content).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
      { type: "image", source: { type: "url", url: "https://example.com/a.png" } },
    ]);
    expect(() =>
      toMessagesWire([
        { role: "user", content: [{ type: "image_url", image_url: { url: "ftp://x/a.png" } }] },
      ]),
    ).toThrow(/base64 data URL or an http\(s\) URL/);
    expect(() => toMessagesWire([{ role: "user", content: [{ type: "file", file: {} }] }])).toThrow(
      /"file" content part cannot be sent/,
    );
  });
});

describe("MessagesUpstream", () => {
  let upstream: ScriptedUpstream;
  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "messages" });
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("reads a streamed answer's text, tool calls, stop reason and usage", async () => {
    upstream.script({
      text: "Calling.",
      toolCalls: [{ name: "exec", arguments: { code: "return [1, 2]" }, id: "toolu_s" }],
      usage: { prompt: 12, completion: 9 },
    });
    const deltas: string[] = [];
    const reply = await new MessagesUpstream({ baseUrl: upstream.baseUrl }).complete(
      request([{ role: "user", content: "hi" }]),
      { signal: new AbortController().signal, onTextDelta: (text) => deltas.push(text) },
    );
    expect(deltas.join("")).toBe("Calling.");
    expect(deltas.length).toBeGreaterThan(1);
    expect(reply).toEqual({
      content: "Calling.",
      toolCalls: [{ id: "toolu_s", name: "exec", arguments: '{"code":"return [1, 2]"}' }],
      finishReason: "tool_calls",
      usage: { promptTokens: 12, completionTokens: 9, totalTokens: 21 },
      model: "claude-test",
    });
  });

  it("refuses before sending a body with tools besides exec and wait (fail closed)", async () => {
    upstream.bodies.length = 0;
    const error = await failure(
      new MessagesUpstream({ baseUrl: upstream.baseUrl }).complete(
        request([{ role: "user", content: "hi" }], {
          tools: [{ name: "delete_everything", description: "", parameters: {} }],
        }),
        { signal: new AbortController().signal },
      ),
    );
    expect(error.kind).toBe("internal");
    expect(upstream.bodies).toHaveLength(0);
  });

  it("shows the body, the transport and the SSE events under the debug switches, with the key redacted", async () => {
    const lines: string[] = [];
    const debugged = new MessagesUpstream({
      baseUrl: upstream.baseUrl,
      apiKey: "sk-ant-secret-123",
      debug: {
        payload: "tools",
        transport: true,
        sse: "peek",
        line: (tag, text) => lines.push(`${tag}: ${text}`),
        redact: (value) => JSON.parse(JSON.stringify(value).replaceAll("sk-ant-secret-123", "[redacted]")),
      },
    });
    upstream.script({ text: "ok" });
    await debugged.complete(request([{ role: "user", content: "hi" }]), {
      signal: new AbortController().signal,
      onTextDelta: () => {},
    });
    expect(lines[0]).toBe("payload: upstream #1 tools: exec, wait");
    expect(
      lines.some((line) => /^transport: upstream #1 POST .*\/messages -> 200 text\/event-stream/.test(line)),
    ).toBe(true);
    const events = lines.filter((line) => line.startsWith("sse: "));
    expect(events).toHaveLength(5);
    expect(events[0]).toContain('"type":"message_start"');
    expect(lines.join("\n")).not.toContain("sk-ant-secret-123");
  });

  describe("against a server that misbehaves", () => {
    let server: Server;
    let baseUrl: string;
    let answer: (res: import("node:http").ServerResponse) => void = () => {};
    beforeAll(async () => {
      server = createServer((req, res) => {
        req.resume();
        req.on("end", () => answer(res));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const call = (stream: boolean, timeoutMs = 2000) =>
      new MessagesUpstream({ baseUrl, timeoutMs }).complete(request([{ role: "user", content: "hi" }]), {
        signal: new AbortController().signal,
        ...(stream ? { onTextDelta: () => {} } : {}),
      });

    it("fails the call on an error event in the stream, with the upstream's message", async () => {
      answer = (res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(
          'event: message_start\ndata: {"type":"message_start","message":{"model":"m","usage":{}}}\n\n',
        );
        res.end(
          'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
        );
      };
      const error = await failure(call(true));
      expect(error.kind).toBe("upstream_error");
      expect(error.message).toContain("Overloaded");
    });

    it("calls an answer without content, or a tool_use without an id, malformed", async () => {
      answer = (res) => res.writeHead(200, { "content-type": "application/json" }).end('{"type":"message"}');
      expect((await failure(call(false))).message).toContain(
        "without a content array, not a Messages API answer",
      );
      answer = (res) =>
        res
          .writeHead(200, { "content-type": "application/json" })
          .end('{"content":[{"type":"tool_use","name":"exec","input":{}}]}');
      expect((await failure(call(false))).kind).toBe("upstream_malformed");
    });

    it("gives up at the timeout and says which setting to raise", async () => {
      answer = () => {}; // never answers
      const error = await failure(call(false, 200));
      expect(error.kind).toBe("upstream_unavailable");
      expect(error.message).toContain("did not answer within 200 ms");
      expect(error.message).toContain("agent.upstream.timeoutMs");
    });
  });
});
