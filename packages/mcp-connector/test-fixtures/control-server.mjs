// A small real MCP server (the SDK's low-level Server over stdio) for what the public servers cannot
// show on demand: raw arguments, hangs, crashes with stderr, and tools/list_changed.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server(
  { name: "control", version: "1.0.0" },
  { capabilities: { tools: { listChanged: true } } },
);
const tools = [
  {
    name: "echo_arguments",
    description: "Returns the arguments exactly as they arrived.",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", description: "Any text" },
        limit: { type: "integer", default: 5 },
      },
      required: ["text"],
    },
  },
  { name: "hang", description: "Never answers until cancelled.", inputSchema: { type: "object" } },
  { name: "cancellations", description: "How many calls were cancelled.", inputSchema: { type: "object" } },
  { name: "crash", description: "Writes to stderr and exits.", inputSchema: { type: "object" } },
  { name: "add_tool", description: "Adds a tool and announces the change.", inputSchema: { type: "object" } },
  {
    name: "deep_result",
    description: "Answers with structured content nested `depth` objects deep.",
    inputSchema: { type: "object", properties: { depth: { type: "integer" } } },
  },
  {
    name: "big_result",
    description: "Answers with a text of `bytes` bytes.",
    inputSchema: { type: "object", properties: { bytes: { type: "integer" } } },
  },
];
// A long list proves pagination is followed: two tools per page.
const PAGE = 2;
let cancelled = 0;

server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const start = Number(request.params?.cursor ?? 0);
  const page = tools.slice(start, start + PAGE);
  return start + PAGE < tools.length ? { tools: page, nextCursor: String(start + PAGE) } : { tools: page };
});

server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const text = (value) => ({ content: [{ type: "text", text: JSON.stringify(value) }] });
  switch (request.params.name) {
    case "echo_arguments":
      return text(request.params.arguments ?? null);
    case "hang":
      return new Promise((resolve) => {
        extra.signal.addEventListener("abort", () => {
          cancelled++;
          resolve(text("cancelled"));
        });
      });
    case "cancellations":
      return text(cancelled);
    case "crash":
      process.stderr.write("fatal: the disk is on fire\n");
      setTimeout(() => process.exit(3), 10);
      return new Promise(() => {});
    case "add_tool": {
      const name = `added_${tools.length}`;
      tools.push({ name, description: "Added at run time.", inputSchema: { type: "object" } });
      await server.sendToolListChanged();
      return text(name);
    }
    case "deep_result": {
      // Written by hand: the SDK's own server cannot serialise an answer this deep (its schema check
      // overflows the stack), but a server in another language, or a hostile one, can send it.
      const depth = request.params.arguments?.depth ?? 5000;
      const nested = `${'{"o":'.repeat(depth)}{"leaf":true}${"}".repeat(depth)}`;
      process.stdout.write(
        `{"jsonrpc":"2.0","id":${JSON.stringify(extra.requestId)},"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":${nested}}}\n`,
      );
      return new Promise(() => {});
    }
    case "big_result":
      return text("x".repeat(request.params.arguments?.bytes ?? 1000));
    default:
      return { isError: true, content: [{ type: "text", text: `unknown tool ${request.params.name}` }] };
  }
});

await server.connect(new StdioServerTransport());
