import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { conversationHash } from "../src/conversation-key.js";
import { MessagesUpstream, type ModelRequest, OpenAiUpstream } from "../src/index.js";
import { jsonDepth } from "../src/limits.js";
import { readSseEvents } from "../src/sse.js";
import { failure } from "./support.js";

// An upstream that misbehaves as an attacker's would: each test scripts the raw answer of a server on
// loopback, and the transport must refuse it with an upstream-class error naming the limit it passed.

const request: ModelRequest = {
  model: "m",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  codeModeDirectOnly: null,
  params: {},
};

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

describe("an upstream that misbehaves", () => {
  let server: Server;
  let baseUrl: string;
  let handler: Handler = (_req, res) => res.end();
  /** Bytes the current handler managed to write before it stopped (the client closed, or it was done). */
  let closed = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => handler(req, res));
      res.on("close", () => {
        closed++;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const sse = (res: ServerResponse) => res.writeHead(200, { "content-type": "text/event-stream" });
  const chunk = (delta: Record<string, unknown>) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  const streamed = { signal: new AbortController().signal, onTextDelta: () => {} };

  /** Writes `total` bytes of `piece` (repeated), waiting for the client to take them; stops when it goes. */
  async function flood(res: ServerResponse, piece: string, total: number): Promise<void> {
    for (let sent = 0; sent < total && !res.destroyed; sent += piece.length) {
      if (!res.write(piece)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off("drain", done);
            res.off("close", done);
            resolve();
          };
          res.on("drain", done);
          res.on("close", done);
        });
      }
    }
    res.end();
  }

  it("refuses a streamed tool call whose index is huge, naming the cap on tool calls per answer", async () => {
    handler = (_req, res) => {
      sse(res);
      res.end(
        chunk({
          tool_calls: [{ index: 4294967294, id: "c1", function: { name: "exec", arguments: "{}" } }],
        }) + "data: [DONE]\n\n",
      );
    };
    const error = await failure(new OpenAiUpstream({ baseUrl }).complete(request, streamed));
    expect(error.status).toBe(502);
    expect(error.kind).toBe("upstream_malformed");
    expect(error.message).toContain("maxToolCallsPerAnswer");
  });

  it("refuses a tool call index that is not a small non-negative integer", async () => {
    for (const index of [-1, 1.5, "0", 1e300]) {
      handler = (_req, res) => {
        sse(res);
        res.end(chunk({ tool_calls: [{ index, id: "c1", function: { name: "exec" } }] }));
      };
      const error = await failure(new OpenAiUpstream({ baseUrl }).complete(request, streamed));
      expect(error.status).toBe(502);
      expect(error.message).toMatch(/index|maxToolCallsPerAnswer/);
    }
  });

  it("refuses more tool calls in one answer than the cap, streamed or not, in either API", async () => {
    const calls = Array.from({ length: 2000 }, (_, index) => ({
      id: `c${index}`,
      type: "function",
      function: { name: "exec", arguments: "{}" },
    }));
    handler = (_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: calls } }],
        }),
      );
    const plain = await failure(
      new OpenAiUpstream({ baseUrl }).complete(request, { signal: new AbortController().signal }),
    );
    expect(plain.status).toBe(502);
    expect(plain.message).toContain("2000 tool calls in one answer");
    expect(plain.message).toContain("maxToolCallsPerAnswer");

    handler = (_req, res) => {
      sse(res);
      for (let index = 0; index < 100; index++) {
        res.write(
          `data: ${JSON.stringify({ type: "content_block_start", index, content_block: { type: "tool_use", id: `t${index}`, name: "exec" } })}\n\n`,
        );
      }
      res.end();
    };
    const messages = await failure(
      new MessagesUpstream({ baseUrl, limits: { maxToolCallsPerAnswer: 10 } }).complete(request, streamed),
    );
    expect(messages.status).toBe(502);
    expect(messages.message).toContain("maxToolCallsPerAnswer");
  });

  it("refuses an SSE line that never ends once it passes the cap, and closes the connection", async () => {
    const before = closed;
    handler = (_req, res) => {
      sse(res);
      void flood(res, `data: {"choices":[{"delta":{"content":"${"x".repeat(64 * 1024)}`, 64 * 1024 * 1024);
    };
    const error = await failure(
      new OpenAiUpstream({ baseUrl, limits: { maxSseEventBytes: 1024 * 1024 } }).complete(request, streamed),
    );
    expect(error.status).toBe(502);
    expect(error.message).toContain("maxSseEventBytes");
    await until(() => closed > before);
  });

  it("refuses an event of many data lines past the cap", async () => {
    handler = (_req, res) => {
      sse(res);
      void flood(res, `data: ${"y".repeat(1000)}\n`, 8 * 1024 * 1024);
    };
    const error = await failure(
      new OpenAiUpstream({ baseUrl, limits: { maxSseEventBytes: 256 * 1024 } }).complete(request, streamed),
    );
    expect(error.message).toContain("maxSseEventBytes");
  });

  it("refuses an endless stream and a huge whole answer at the cap on answer bytes", async () => {
    const limits = { maxAnswerBytes: 2 * 1024 * 1024 };
    handler = (_req, res) => {
      sse(res);
      void flood(res, chunk({ content: "z".repeat(1000) }), 512 * 1024 * 1024);
    };
    const endless = await failure(new OpenAiUpstream({ baseUrl, limits }).complete(request, streamed));
    expect(endless.status).toBe(502);
    expect(endless.message).toContain("maxAnswerBytes");

    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      void flood(res, " ".repeat(64 * 1024), 512 * 1024 * 1024);
    };
    const whole = await failure(
      new MessagesUpstream({ baseUrl, limits }).complete(request, { signal: new AbortController().signal }),
    );
    expect(whole.status).toBe(502);
    expect(whole.message).toContain("maxAnswerBytes");
  });

  it("refuses a whole answer nested deeper than any real one, instead of overflowing the stack", async () => {
    const deep = `${"[".repeat(200_000)}${"]".repeat(200_000)}`;
    handler = (_req, res) =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(
          `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"exec","arguments":${deep}}}]}}]}`,
        );
    const error = await failure(
      new OpenAiUpstream({ baseUrl }).complete(request, { signal: new AbortController().signal }),
    );
    expect(error.status).toBe(502);
    expect(error.message).toContain("levels deep");
  });

  it("does not name the upstream's address (nor any credentials in it) to clients unless told to", async () => {
    handler = (_req, res) =>
      res.writeHead(500, { "content-type": "application/json" }).end('{"error":{"message":"boom"}}');
    const withUser = baseUrl.replace("http://", "http://user:s3cret@");
    const hidden = await failure(
      new OpenAiUpstream({ baseUrl: withUser }).complete(request, { signal: new AbortController().signal }),
    );
    expect(hidden.message).toContain("boom");
    expect(hidden.message).not.toContain("127.0.0.1");
    expect(hidden.message).not.toContain("s3cret");
    const shown = await failure(
      new OpenAiUpstream({ baseUrl: withUser, showAddress: true }).complete(request, {
        signal: new AbortController().signal,
      }),
    );
    expect(shown.message).toContain(baseUrl);
    expect(shown.message).not.toContain("s3cret");
    expect(shown.message).not.toContain("user");
  });
});

describe("the SSE reader", () => {
  async function events(chunks: string[], max?: number): Promise<string[]> {
    const body = (async function* () {
      for (const text of chunks) yield new TextEncoder().encode(text);
    })();
    const out: string[] = [];
    for await (const data of readSseEvents(body, new AbortController().signal, max)) out.push(data);
    return out;
  }

  it("reads LF, CRLF and CR line ends, split anywhere, multi-line data and multi-byte text", async () => {
    const text = "data: a\r\n\r\ndata: é\ndata: ü\n\n: comment\revent: x\rdata: c\r\rdata: last";
    const whole = await events([text]);
    expect(whole).toEqual(["a", "é\nü", "c", "last"]);
    // Every split point, in bytes: a CR and its LF in two chunks, a character cut in half.
    const bytes = new TextEncoder().encode(text);
    for (let at = 1; at < bytes.length; at++) {
      const body = (async function* () {
        yield bytes.subarray(0, at);
        yield bytes.subarray(at);
      })();
      const out: string[] = [];
      for await (const data of readSseEvents(body, new AbortController().signal)) out.push(data);
      expect(out).toEqual(whole);
    }
  });

  it("fails a line longer than its cap, however it is cut", async () => {
    const error = await events(["data: ", "x".repeat(600), "x".repeat(600)], 1000).catch((e: Error) => e);
    expect((error as Error).message).toContain("maxSseEventBytes");
  });
});

describe("conversation hashing", () => {
  it("hashes tool-call arguments nested 200,000 deep without overflowing the stack", () => {
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
    const messages = (args: string) => [
      { role: "user" as const, content: "x" },
      { role: "assistant" as const, content: null, toolCalls: [{ id: "c", name: "f", arguments: args }] },
    ];
    const deep = nested(200_000);
    expect(conversationHash(messages(deep))).toBe(conversationHash(messages(deep)));
    expect(conversationHash(messages(deep))).not.toBe(conversationHash(messages(nested(199_999))));
    // Arguments of a real depth still hash by value: another spacing is the same conversation.
    const real = nested(400);
    expect(conversationHash(messages(real))).toBe(conversationHash(messages(real.replaceAll(":", ": "))));
  });

  it("keeps the hashes it gave before (sorted keys, undefined left out)", () => {
    const messages = [
      { role: "user" as const, content: [{ b: 1, a: [1, "2", null, { d: undefined, c: true }] }] },
      {
        role: "assistant" as const,
        content: "",
        toolCalls: [{ id: "i", name: "n", arguments: '{"z":1,"y":[]}' }],
      },
      { role: "tool" as const, toolCallId: "i", content: "r" },
    ];
    // The digest of the canonical JSON as the recursive version wrote it.
    expect(conversationHash(messages)).toBe("kAo8ri7YE0gZSQTXKg-whRFT1ydDEpiVVjbDjNh4f_U");
  });
});

describe("jsonDepth", () => {
  it("counts nesting outside strings and stops past the maximum", () => {
    expect(jsonDepth('{"a":[1,{"b":"[[[[\\"[["}]}', 10)).toBe(3);
    expect(jsonDepth("[".repeat(1_000_000), 64)).toBe(65);
    expect(jsonDepth('"\\\\"[', 10)).toBe(1);
  });
});

async function until(check: () => boolean): Promise<void> {
  for (let round = 0; round < 200 && !check(); round++) await new Promise((r) => setTimeout(r, 25));
  expect(check()).toBe(true);
}
