import { oneLine } from "./comments.js";
import type { McpDeclaredServer } from "./types.js";

export const INDEX_PATH = "mcp/index.d.ts";

type SharedType = { name: string; doc?: string; body: string; uses: string[] };

// The shapes every server shares: MCP's CallToolResult and the resource and prompt results, trimmed to
// what guest code reads. Servers may send more (MCP's \`annotations\`, \`_meta\`, \`icons\`, ...) and the guest
// gets it as sent; the index signatures say so. `mcp/index.d.ts` declares
// them all with their docs; each server file and each `$api(tool)` text declares, inside its namespace,
// the ones it uses, so that every file type-checks on its own.
const SHARED_TYPES: SharedType[] = [
  {
    name: "McpToolResult",
    doc: "What every MCP tool call resolves to: the protocol's CallToolResult, as the server sent it.",
    body: `{
  /** Text, images, audio, resource links and embedded resources, in order. */
  content?: McpContent[];
  /** The typed result of a tool that declares an output schema. */
  structuredContent?: unknown;
  /** True when the tool reported a failure (the reason is in \`content\`); such a result is returned, not thrown. */
  isError?: boolean;
  [key: string]: unknown;
}`,
    uses: ["McpContent"],
  },
  {
    name: "McpToolResultOf<T>",
    doc: "The result of a tool with an output schema: `structuredContent` is typed.",
    body: "McpToolResult & { structuredContent?: T }",
    uses: ["McpToolResult"],
  },
  {
    name: "McpContent",
    body: `
  | { type: "text"; text: string; annotations?: McpAnnotations; [key: string]: unknown }
  | { type: "image" | "audio"; data: string; mimeType: string; annotations?: McpAnnotations; [key: string]: unknown }
  | {
      type: "resource_link";
      uri: string;
      name: string;
      description?: string;
      mimeType?: string;
      annotations?: McpAnnotations;
      [key: string]: unknown;
    }
  | { type: "resource"; resource: McpResourceContent; annotations?: McpAnnotations; [key: string]: unknown }`,
    uses: ["McpResourceContent", "McpAnnotations"],
  },
  {
    name: "McpAnnotations",
    doc: "Hints a server may attach to content: who it is for, how important it is.",
    body: '{ audience?: Array<"user" | "assistant">; priority?: number; lastModified?: string }',
    uses: [],
  },
  {
    name: "McpResourceContent",
    body: "{ uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown }",
    uses: [],
  },
  {
    name: "McpApiHeader",
    doc: "The text `$api()` returns: the declarations of one server, or of one tool.",
    body: "string",
    uses: [],
  },
  {
    name: "McpResourceList",
    body: `{
  resources: Array<{
    uri: string;
    name: string;
    title?: string;
    description?: string;
    mimeType?: string;
    [key: string]: unknown;
  }>;
  resourceTemplates: Array<{
    uriTemplate: string;
    name: string;
    title?: string;
    description?: string;
    mimeType?: string;
    [key: string]: unknown;
  }>;
}`,
    uses: [],
  },
  {
    name: "McpResourceContents",
    body: "{ contents: McpResourceContent[]; [key: string]: unknown }",
    uses: ["McpResourceContent"],
  },
  {
    name: "McpPromptList",
    body: `{
  prompts: Array<{
    name: string;
    title?: string;
    description?: string;
    arguments?: Array<{ name: string; description?: string; required?: boolean; [key: string]: unknown }>;
    [key: string]: unknown;
  }>;
}`,
    uses: [],
  },
  {
    name: "McpPromptResult",
    body: `{
  description?: string;
  messages: Array<{ role: "user" | "assistant"; content: McpContent; [key: string]: unknown }>;
  [key: string]: unknown;
}`,
    uses: ["McpContent"],
  },
];

const baseName = (name: string) => name.replace(/<.*$/, "");

function declareShared(type: SharedType, indent: string, withDoc: boolean): string {
  const doc = withDoc && type.doc ? `${indent}/** ${type.doc} */\n` : "";
  const body = type.body.split("\n").join(`\n${indent}`);
  return `${doc}${indent}type ${type.name} =${body.startsWith("\n") ? "" : " "}${body};\n`;
}

/** The shared result types a declaration text names (`McpToolResult`, `McpResourceList`, ...). */
export function sharedTypesNamedIn(text: string): string[] {
  return SHARED_TYPES.map((type) => baseName(type.name)).filter((name) =>
    new RegExp(`\\b${name}\\b`).test(text),
  );
}

/**
 * The shared result types that `roots` need (with what those refer to), declared at `indent` without
 * their docs: what a server file or a tool's `$api` text carries so it stands alone.
 */
export function sharedTypesFor(roots: Iterable<string>, indent: string): string {
  const wanted = new Set<string>();
  const pending = [...roots];
  while (pending.length > 0) {
    const name = pending.pop()!;
    const type = SHARED_TYPES.find((candidate) => baseName(candidate.name) === name);
    if (!type || wanted.has(name)) continue;
    wanted.add(name);
    pending.push(...type.uses);
  }
  return SHARED_TYPES.filter((type) => wanted.has(baseName(type.name)))
    .map((type) => declareShared(type, indent, false))
    .join("");
}

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
  return `${lines.join("\n")}\n\n${SHARED_TYPES.map((type) => declareShared(type, "", true)).join("\n")}`;
}
