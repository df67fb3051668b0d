import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { context, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpConnector, type McpConnector } from "../src/index.js";

// Downstream requests under client spans, with the trace passed on to an HTTP server twice: the
// `traceparent` header of the POST and `params._meta.traceparent`. The server is a real MCP SDK server
// (stateless Streamable HTTP) that records what each request carried.

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const requests: Array<{ method: string; headers: IncomingHttpHeaders }> = [];
const metas: unknown[] = [];
let server: Server;
let connector: McpConnector;

beforeAll(async () => {
  provider.register();
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
      requests.push({ method: String(body?.method ?? req.method), headers: req.headers });
      const mcp = new McpServer({ name: "probe", version: "1.0.0" });
      mcp.registerTool("probe", { description: "Says what it got." }, (extra) => {
        metas.push(extra._meta);
        return { content: [{ type: "text", text: "ok" }] };
      });
      mcp.registerTool("broken", { description: "Always reports an error." }, () => ({
        content: [{ type: "text", text: "it broke" }],
        isError: true,
      }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => void transport.close());
      await mcp.connect(transport);
      await transport.handleRequest(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  connector = createMcpConnector({ probe: { url: `http://127.0.0.1:${port}/mcp` } });
  await connector.start();
  expect(connector.diagnostics).toEqual([]);
});

afterAll(async () => {
  await connector?.close();
  server?.close();
  await provider.shutdown();
  trace.disable();
  context.disable();
});

describe("tracing downstream MCP requests", () => {
  it("puts a call under a client span and passes its trace on in the header and in params._meta", async () => {
    exporter.reset();
    requests.length = 0;
    const tracer = trace.getTracer("test");
    await tracer.startActiveSpan("parent", async (parent) => {
      const result = await connector.callTool("probe", "probe", {});
      expect(result.content).toEqual([{ type: "text", text: "ok" }]);
      parent.end();
    });
    const spans = exporter.getFinishedSpans();
    const parent = spans.find((span) => span.name === "parent")!;
    const call = spans.find((span) => span.name === "tools/call probe")!;
    expect(call).toBeDefined();
    expect(call.kind).toBe(2); // CLIENT
    expect(call.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(call.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "probe",
      "gen_ai.operation.name": "execute_tool",
      "network.transport": "tcp",
      "server.address": "127.0.0.1",
      "codecell.mcp.server": "probe",
    });
    const { traceId, spanId } = call.spanContext();
    const expected = new RegExp(`^00-${traceId}-${spanId}-01$`);
    const post = requests.find((request) => request.method === "tools/call")!;
    expect(post.headers.traceparent).toMatch(expected);
    expect((metas.at(-1) as { traceparent?: string }).traceparent).toMatch(expected);
  });

  it("marks a tool's own failure (isError) on the span without failing the request", async () => {
    exporter.reset();
    const result = await connector.callTool("probe", "broken", {});
    expect(result.isError).toBe(true);
    const [call] = exporter.getFinishedSpans().filter((span) => span.name === "tools/call broken");
    expect(call!.status.code).toBe(2); // ERROR
    expect(call!.attributes["error.type"]).toBe("tool_error");
  });
});
