import { oneLine } from "./comments.js";
import type { McpDeclaredServer } from "./types.js";

export const INDEX_PATH = "mcp/index.d.ts";

// The shapes every server shares: MCP's CallToolResult and the resource and prompt results, trimmed to
// what guest code reads. Servers may send more; the index signatures say so.
const SHARED_TYPES = `/** What every MCP tool call resolves to: the protocol's CallToolResult, as the server sent it. */
type McpToolResult = {
  /** Text, images, audio, resource links and embedded resources, in order. */
  content?: McpContent[];
  /** The typed result of a tool that declares an output schema. */
  structuredContent?: unknown;
  /** True when the tool reported a failure (the reason is in \`content\`); such a result is returned, not thrown. */
  isError?: boolean;
  [key: string]: unknown;
};

/** The result of a tool with an output schema: \`structuredContent\` is typed. */
type McpToolResultOf<T> = McpToolResult & { structuredContent?: T };

type McpContent =
  | { type: "text"; text: string }
  | { type: "image" | "audio"; data: string; mimeType: string }
  | { type: "resource_link"; uri: string; name: string; description?: string; mimeType?: string }
  | { type: "resource"; resource: McpResourceContent };

type McpResourceContent = { uri: string; mimeType?: string; text?: string; blob?: string };

/** The text \`$api()\` returns: the declarations of one server, or of one tool. */
type McpApiHeader = string;

type McpResourceList = {
  resources: Array<{ uri: string; name: string; title?: string; description?: string; mimeType?: string }>;
  resourceTemplates: Array<{ uriTemplate: string; name: string; title?: string; description?: string }>;
};

type McpResourceContents = { contents: McpResourceContent[] };

type McpPromptList = {
  prompts: Array<{
    name: string;
    title?: string;
    description?: string;
    arguments?: Array<{ name: string; description?: string; required?: boolean }>;
  }>;
};

type McpPromptResult = {
  description?: string;
  messages: Array<{ role: "user" | "assistant"; content: McpContent }>;
};
`;

/** `mcp/index.d.ts`: which servers exist, where each is declared, and the result types they share. */
export function renderIndexFile(servers: readonly McpDeclaredServer[]): string {
  const lines = ["// MCP servers visible in this run. These files are virtual and read-only."];
  if (servers.length === 0) {
    lines.push("// No MCP server is visible, so MCP has no members.");
  } else {
    lines.push(
      '// Read a server\'s tools with API.read("mcp/<server>.d.ts"), or MCP.<server>.$api() inside a cell.',
    );
    lines.push("// Call a tool as MCP.<server>.<tool>({ ...input }).");
    lines.push("//");
    const width = Math.max(...servers.map((server) => server.identifier.length));
    for (const server of servers) {
      const offers = [`${server.tools.length} tool${server.tools.length === 1 ? "" : "s"}`];
      if (server.resources) offers.push("resources");
      if (server.prompts) offers.push("prompts");
      const title = server.title ? ` ${oneLine(server.title)}:` : "";
      lines.push(
        `//   MCP.${server.identifier.padEnd(width)}  ${server.path}${title} ${offers.join(", ")}`.trimEnd(),
      );
    }
  }
  return `${lines.join("\n")}\n\n${SHARED_TYPES}`;
}
