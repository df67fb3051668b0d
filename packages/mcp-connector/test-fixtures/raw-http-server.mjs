// A minimal MCP server over Streamable HTTP written by hand (no SDK), so it can send what the SDK's own
// server cannot: answers nested 5,000 deep and answers over 10 MiB. It answers every request as JSON, or
// as an SSE stream when started with `sse` (the two ways a Streamable HTTP server may answer a POST).
import { createServer } from "node:http";

const sse = process.argv[2] === "sse";
const tools = [
  { name: "deep_result", description: "Nested `depth` deep.", inputSchema: { type: "object" } },
  { name: "big_result", description: "A text of `bytes` bytes.", inputSchema: { type: "object" } },
  { name: "echo", description: "Echoes `text`.", inputSchema: { type: "object" } },
];

function answer(request) {
  const id = JSON.stringify(request.id);
  const args = request.params?.arguments ?? {};
  switch (request.method) {
    case "initialize":
      return `{"jsonrpc":"2.0","id":${id},"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1.0.0"}}}`;
    case "tools/list":
      return JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { tools } });
    case "tools/call":
      if (request.params.name === "deep_result") {
        const depth = args.depth ?? 5000;
        const nested = `${'{"o":'.repeat(depth)}{"leaf":true}${"}".repeat(depth)}`;
        return `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":${nested}}}`;
      }
      if (request.params.name === "big_result") {
        const text = "x".repeat(args.bytes ?? 1000);
        return `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"${text}"}]}}`;
      }
      return JSON.stringify({
        jsonrpc: "2.0",
        id: request.id,
        result: { content: [{ type: "text", text: String(args.text) }] },
      });
    default:
      return JSON.stringify({ jsonrpc: "2.0", id: request.id, result: {} });
  }
}

const server = createServer((req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (request.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    const body = answer(request);
    const headers = { "mcp-session-id": "raw-session" };
    if (sse) {
      res.writeHead(200, { ...headers, "content-type": "text/event-stream" });
      res.end(`event: message\ndata: ${body}\n\n`);
    } else {
      res.writeHead(200, { ...headers, "content-type": "application/json" });
      res.end(body);
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stderr.write(`CODECELL_TEST_PORT=${server.address().port}\n`);
});
