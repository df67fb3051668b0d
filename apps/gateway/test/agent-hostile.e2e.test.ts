import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { OtlpReceiver } from "./support/otlp-receiver.js";

// One client, or one upstream model, tried as an attacker would: a real gateway (`codecell serve
// --http`) in front of a raw upstream on loopback whose answers each test scripts. Each attack must end
// in a clear error to the offender (an upstream-class 502 naming the limit, or the client's 400), with
// /healthz still answering and the gateway's memory bounded by the configured caps.

const TOKEN = "hostile-client-token-0123456789";
const MIB = 1024 * 1024;
const TOOLS = [
  {
    type: "function",
    function: { name: "pick", description: "Pick a file.", parameters: { type: "object", properties: {} } },
  },
];

type Handler = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => void;

/** The upstream: each request goes to the current handler; requests and their headers are kept. */
class HostileUpstream {
  handler: Handler = (_req, res) => res.writeHead(500).end();
  readonly requests: Array<{ headers: IncomingMessage["headers"]; body: Record<string, unknown> }> = [];
  /** Bytes the flood wrote, and whether the gateway closed the connection it was writing to. */
  flooded = 0;
  floodClosed = false;
  readonly #server: Server;

  constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
        this.requests.push({ headers: req.headers, body });
        this.handler(req, res, body);
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
  }

  /** Writes `piece` again and again up to `total` bytes, at the pace the gateway reads; stops when it goes. */
  async flood(res: ServerResponse, piece: string, total: number): Promise<void> {
    this.flooded = 0;
    this.floodClosed = false;
    res.once("close", () => {
      this.floodClosed = true;
    });
    while (this.flooded < total && !res.destroyed) {
      this.flooded += piece.length;
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

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

const chunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
const completion = (message: Record<string, unknown>) =>
  JSON.stringify({ model: "m", choices: [{ index: 0, message: { role: "assistant", ...message } }] });

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

async function until(check: () => boolean, rounds = 400): Promise<void> {
  for (let round = 0; round < rounds && !check(); round++) await new Promise((r) => setTimeout(r, 50));
  expect(check()).toBe(true);
}

describe("the agent endpoint against a hostile upstream and hostile clients", () => {
  let upstream: HostileUpstream;
  let upstreamUrl: string;
  let collector: OtlpReceiver;
  /** Small caps, telemetry that ignores the client's sampling flag. */
  let gateway: HttpGateway;
  /** The default caps but a huge answer cap: what holds a streamed answer back is backpressure alone. */
  let roomy: HttpGateway;

  beforeAll(async () => {
    upstream = new HostileUpstream();
    [upstreamUrl, collector] = await Promise.all([upstream.start(), OtlpReceiver.start()]);
    const config = (
      limits: Record<string, unknown>,
      telemetry?: Record<string, unknown>,
      codeMode: Record<string, unknown> = {},
    ) =>
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000, ...codeMode } },
          mcpServers: {},
          http: { tokens: [{ name: "client", token: TOKEN }] },
          agent: { upstream: { baseUrl: upstreamUrl, apiKey: "upstream-key", timeoutMs: 60_000 }, limits },
          ...(telemetry ? { telemetry } : {}),
        }),
      ).configPath;
    [gateway, roomy] = await Promise.all([
      startHttpGateway(
        config(
          { maxAnswerBytes: 4 * MIB, maxSseEventBytes: MIB, maxCellsPerRequest: 3 },
          { endpoint: collector.url, sampleRatio: 0, honorClientSampling: false },
          { maxSnapshotBytes: MIB },
        ),
      ),
      startHttpGateway(config({ maxAnswerBytes: 1024 * MIB })),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([gateway?.stop(), roomy?.stop()]);
    await upstream?.close();
    await collector?.close();
  });

  beforeEach(() => {
    upstream.requests.length = 0;
  });

  const post = (target: HttpGateway, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${target.url}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const turn = (extra: Record<string, unknown> = {}) => ({
    model: "m",
    messages: [{ role: "user", content: "go" }],
    tools: TOOLS,
    ...extra,
  });
  async function healthy(target: HttpGateway): Promise<void> {
    const response = await fetch(`${target.url}healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  }
  async function refusal(response: Response, status: number, code: string, says: string): Promise<void> {
    expect(response.status).toBe(status);
    const body = (await response.json()) as { error: { code: string; message: string }; jsonrpc?: unknown };
    expect(body.jsonrpc).toBeUndefined();
    expect(body.error.code).toBe(code);
    expect(body.error.message).toContain(says);
    expect(body.error.message).not.toContain(upstreamUrl.replace(/\/v1$/, ""));
  }

  describe("upstream answers", () => {
    it("a streamed tool call with index 4294967294: a 502 naming the cap, and /healthz answers", async () => {
      upstream.handler = (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(
          `${chunk({ tool_calls: [{ index: 4294967294, id: "c", function: { name: "exec", arguments: "{}" } }] })}data: [DONE]\n\n`,
        );
      };
      await refusal(
        await post(gateway, turn({ stream: true })),
        502,
        "upstream_malformed",
        "maxToolCallsPerAnswer",
      );
      await healthy(gateway);
    });

    it("a data line that never ends: a 502 naming the event cap, and the upstream connection is closed", async () => {
      upstream.handler = (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        void upstream.flood(res, `data: ${"x".repeat(64 * 1024)}`, 64 * MIB);
      };
      await refusal(
        await post(gateway, turn({ stream: true })),
        502,
        "upstream_malformed",
        "maxSseEventBytes",
      );
      await until(() => upstream.floodClosed);
      expect(upstream.flooded).toBeLessThan(64 * MIB);
      await healthy(gateway);
    });

    it("an endless stream: the stream ends in an error event naming the answer cap, memory stays bounded", async () => {
      const before = rssOf(gateway.child.pid!);
      upstream.handler = (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        void upstream.flood(res, chunk({ content: "z".repeat(4096) }), 512 * MIB);
      };
      const response = await post(gateway, turn({ stream: true }));
      expect(response.status).toBe(200);
      const text = await response.text();
      const last = JSON.parse(text.trim().split("\n\n").at(-1)!.slice("data: ".length)) as {
        error: { code: string; message: string };
      };
      expect(last.error.code).toBe("upstream_malformed");
      expect(last.error.message).toContain("maxAnswerBytes");
      await until(() => upstream.floodClosed);
      expect(upstream.flooded).toBeLessThan(128 * MIB);
      // Far below the 512 MiB the upstream meant to send: what the gateway held was bounded by the cap.
      expect(rssOf(gateway.child.pid!) - before).toBeLessThan(192 * MIB);
      await healthy(gateway);
    });

    it("2,000 exec calls in one answer: a 502 naming the cap, before any cell runs", async () => {
      const calls = Array.from({ length: 2000 }, (_, index) => ({
        id: `c${index}`,
        type: "function",
        function: { name: "exec", arguments: JSON.stringify({ code: "return 1" }) },
      }));
      upstream.handler = (_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(completion({ tool_calls: calls }));
      await refusal(await post(gateway, turn()), 502, "upstream_malformed", "maxToolCallsPerAnswer");
      expect(upstream.requests).toHaveLength(1);
    });

    it("cells past the cap per request: a 502 naming it, and the answer that passed it runs none", async () => {
      let answer = 0;
      upstream.handler = (_req, res) => {
        answer++;
        const calls = [0, 1].map((index) => ({
          id: `a${answer}c${index}`,
          type: "function",
          function: { name: "exec", arguments: JSON.stringify({ code: `return ${answer}` }) },
        }));
        res.writeHead(200, { "content-type": "application/json" }).end(completion({ tool_calls: calls }));
      };
      await refusal(await post(gateway, turn()), 502, "upstream_malformed", "maxCellsPerRequest");
      // Two cells ran after the first answer; the second answer (two more, four in all) ran none.
      expect(upstream.requests).toHaveLength(2);
      const results = (upstream.requests[1]!.body.messages as Array<{ role: string }>).filter(
        (message) => message.role === "tool",
      );
      expect(results).toHaveLength(2);
    });

    it("an answer larger than a conversation record holds: a 502 naming the store's limit, not a 400", async () => {
      upstream.handler = (_req, res) =>
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(completion({ content: "a".repeat(2 * MIB) }));
      await refusal(
        await post(gateway, turn()),
        502,
        "upstream_malformed",
        "tools.codeMode.maxSnapshotBytes",
      );
    });

    it("an upstream error does not show the upstream's address to the client", async () => {
      upstream.handler = (_req, res) =>
        res.writeHead(503, { "content-type": "application/json" }).end('{"error":{"message":"overloaded"}}');
      await refusal(await post(gateway, turn()), 502, "upstream_error", "overloaded");
    });
  });

  describe("backpressure", () => {
    it.each([
      ["/v1/chat/completions", () => turn({ stream: true })],
      ["/v1/responses", () => ({ model: "m", input: "go", stream: true })],
    ])(
      "a streaming client of %s that does not read holds the upstream back; when it goes, the upstream call ends",
      async (path, request) => {
        upstream.handler = (_req, res) => {
          res.writeHead(200, { "content-type": "text/event-stream" });
          void upstream.flood(res, chunk({ content: "w".repeat(16 * 1024) }), 256 * MIB);
        };
        const { port } = new URL(roomy.url);
        const body = JSON.stringify(request());
        const socket = connect(Number(port), "127.0.0.1");
        await new Promise<void>((resolve) => socket.once("connect", resolve));
        socket.write(
          `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        socket.pause(); // Reads nothing of the answer.
        await until(() => upstream.flooded > 0);
        // Wait until the flood stops moving (the buffers between are full) or has sent everything.
        let last = -1;
        for (
          let round = 0;
          round < 120 && upstream.flooded !== last && upstream.flooded < 256 * MIB;
          round++
        ) {
          last = upstream.flooded;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
        expect(upstream.flooded).toBeLessThan(128 * MIB);
        expect(upstream.floodClosed).toBe(false);
        socket.destroy();
        await until(() => upstream.floodClosed);
        await healthy(roomy);
      },
    );
  });

  describe("client requests", () => {
    it("more tools than the cap: a 400 naming it, nothing sent upstream", async () => {
      const tools = Array.from({ length: 129 }, (_, index) => ({
        type: "function",
        function: { name: `t${index}`, parameters: { type: "object" } },
      }));
      await refusal(await post(gateway, turn({ tools })), 400, "invalid_request", "maxClientTools");
      expect(upstream.requests).toHaveLength(0);
    });

    it("on /v1/responses, tools count wherever the request carries them: namespaces, additional_tools, a client's own code mode", async () => {
      const functions = (count: number) =>
        Array.from({ length: count }, (_, index) => ({
          type: "function",
          name: `t${index}`,
          parameters: { type: "object" },
        }));
      const declarations = Array.from(
        { length: 129 },
        (_, index) =>
          `### \`d${index}\`\nA declared tool.\n\n\`\`\`ts\ndeclare const tools: { d${index}(args: { a: string }): Promise<unknown>; };\n\`\`\`\n`,
      ).join("\n");
      const postResponses = (body: Record<string, unknown>) =>
        fetch(`${gateway.url}v1/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "m", input: "go", ...body }),
        });
      const go = { role: "user", content: "go" };
      for (const body of [
        { tools: [{ type: "namespace", name: "app", tools: functions(129) }] },
        {
          tools: functions(64),
          input: [
            {
              type: "additional_tools",
              tools: functions(65).map((tool) => ({ ...tool, name: `x${tool.name}` })),
            },
            go,
          ],
        },
        { tools: [{ type: "custom", name: "exec", description: declarations }] },
      ]) {
        await refusal(await postResponses(body), 400, "invalid_request", "129 tools");
      }
      expect(upstream.requests).toHaveLength(0);
      // At the cap, the same shapes are taken.
      upstream.handler = (_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(completion({ content: "fine" }));
      const atCap = await postResponses({
        tools: [{ type: "namespace", name: "app", tools: functions(128) }],
      });
      expect(atCap.status).toBe(200);
      expect(upstream.requests).toHaveLength(1);
    });

    it("on /v1/messages, the same caps answer in the Messages API's error shape", async () => {
      const tools = Array.from({ length: 129 }, (_, index) => ({
        name: `t${index}`,
        input_schema: { type: "object" },
      }));
      const response = await fetch(`${gateway.url}v1/messages`, {
        method: "POST",
        headers: { "x-api-key": TOKEN, "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          max_tokens: 10,
          messages: [{ role: "user", content: "go" }],
          tools,
        }),
      });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { type: string; error: { type: string; message: string } };
      expect(body.type).toBe("error");
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain("maxClientTools");
    });

    it("a body nested 200,000 deep: a 400 naming the depth cap", async () => {
      const body = `{"model":"m","messages":[{"role":"user","content":"go"}],"tools":[],"x":${"[".repeat(200_000)}${"]".repeat(200_000)}}`;
      await refusal(await post(gateway, body), 400, "invalid_request", "maxJsonDepth");
      await healthy(gateway);
    });

    it("tool-call arguments nested 200,000 deep in the conversation: answered, not a 500", async () => {
      upstream.handler = (_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(completion({ content: "fine" }));
      const deep = `${'{"a":'.repeat(200_000)}1${"}".repeat(200_000)}`;
      const response = await post(
        gateway,
        turn({
          messages: [
            { role: "user", content: "go" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "c1", type: "function", function: { name: "pick", arguments: deep } }],
            },
            { role: "tool", tool_call_id: "c1", content: "done" },
            { role: "user", content: "and now?" },
          ],
        }),
      );
      expect(response.status).toBeLessThan(500);
      await healthy(gateway);
    });

    it("a thread id with broken percent-encoding: a 400 in the endpoint's shape", async () => {
      const response = await fetch(`${gateway.url}v1/codecell/threads/%E0%A4%A/trajectory`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      await refusal(response, 400, "invalid_request", "percent-encoding");
    });

    it("a request target no URL parser takes: a 400, and the gateway goes on", async () => {
      const { port } = new URL(gateway.url);
      const socket = connect(Number(port), "127.0.0.1");
      let answer = "";
      socket.on("data", (data: Buffer) => {
        answer += data.toString("utf8");
      });
      socket.write(`GET //[ HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: close\r\n\r\n`);
      await new Promise<void>((resolve) => socket.once("close", () => resolve()));
      expect(answer).toMatch(/^HTTP\/1\.1 400/);
      await healthy(gateway);
    });
  });

  describe("secrets and trust", () => {
    it("does not pass the client's baggage upstream, and applies its own sampler to the client's trace", async () => {
      upstream.handler = (_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end(completion({ content: "hi" }));
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
      const response = await post(gateway, turn({ tools: undefined }), {
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
        baggage: "user.id=alice,secret=token-xyz",
      });
      expect(response.status).toBe(200);
      const headers = upstream.requests[0]!.headers;
      expect(headers.baggage).toBeUndefined();
      // Same trace, but not sampled: sampleRatio 0 decides, not the client's flag.
      expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    });

    it("refuses credentials in agent.upstream.baseUrl, saying where the key goes, without printing them", async () => {
      const configPath = makeSetup(
        baseConfig({
          mcpServers: {},
          agent: { upstream: { baseUrl: "http://user:s3cret-pass@127.0.0.1:9/v1" } },
        }),
      ).configPath;
      const error = await startHttpGateway(configPath).then(
        async (started) => {
          await started.stop();
          return null;
        },
        (failure: Error) => failure,
      );
      expect(error?.message).toContain("agent.upstream.baseUrl");
      expect(error?.message).toContain("agent.upstream.apiKey");
      expect(error?.message).not.toContain("s3cret-pass");
    });
  });
});

describe("shared caps between principals", () => {
  const tokens = { mallory: "mallory-token-0123456789abcdef", alice: "alice-token-0123456789abcdefgh" };
  let upstream: HostileUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = new HostileUpstream();
    const upstreamUrl = await upstream.start();
    // Every request: the model runs a cell that hands the client's tool out (the run waits for it);
    // once the cell's result is back, the model says it as its answer.
    upstream.handler = (_req, res, body) => {
      const messages = body.messages as Array<{ role: string; content?: string }>;
      const last = messages.at(-1);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        last?.role === "tool"
          ? completion({ content: String(last.content) })
          : completion({
              tool_calls: [
                {
                  id: `exec-${messages.length}`,
                  type: "function",
                  function: {
                    name: "exec",
                    arguments: JSON.stringify({ code: "return await tools.pick({})" }),
                  },
                },
              ],
            }),
      );
    };
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
          mcpServers: {},
          snapshotStore: { kind: "memory", maxLiveRuns: 4 },
          http: { tokens: Object.entries(tokens).map(([name, token]) => ({ name, token })) },
          agent: { upstream: { baseUrl: upstreamUrl, apiKey: "upstream-key", timeoutMs: 60_000 } },
        }),
      ).configPath,
    );
  }, 60_000);

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  const handOut = async (who: keyof typeof tokens, index: number) => {
    const response = await fetch(`${gateway.url}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens[who]}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        messages: [{ role: "user", content: `go ${index}` }],
        tools: TOOLS,
      }),
    });
    expect(response.status).toBe(200);
    return (
      (await response.json()) as {
        choices: Array<{ finish_reason: string; message: { content: string | null } }>;
      }
    ).choices[0]!;
  };

  it("one principal's waiting hand-outs fill only its share of maxLiveRuns; another's still wait, and the refusal names only the caller's runs", async () => {
    const mallory = [];
    for (let index = 0; index < 4; index++) mallory.push(await handOut("mallory", index));
    // Half of maxLiveRuns (4) is mallory's: two runs wait, the next cells are refused.
    expect(mallory.slice(0, 2).map((choice) => choice.finish_reason)).toEqual(["tool_calls", "tool_calls"]);
    const refused = mallory[2]!;
    expect(refused.finish_reason).toBe("stop");
    expect(refused.message.content).toContain("this caller already has 2 suspended runs live");
    expect(refused.message.content).toContain("maxLiveRunsPerPrincipal");
    // Alice's hand-outs wait as usual: mallory could not take her share.
    for (let index = 0; index < 2; index++)
      expect((await handOut("alice", index)).finish_reason).toBe("tool_calls");
    // Now the store is full: alice hears of her own two runs, not of mallory's.
    const full = await handOut("alice", 2);
    expect(full.message.content).toContain("this caller has 2 of them");
    expect(full.message.content).not.toContain("4 suspended runs");
    const response = await fetch(`${gateway.url}healthz`);
    expect(response.status).toBe(200);
  });
});
