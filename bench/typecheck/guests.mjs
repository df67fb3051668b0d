// The guests the bench checks cells against: the 97 tools of the captured public MCP servers (with a
// few core tools and a namespace beside them), and 1,000 synthetic catalog tools.
import { readdirSync, readFileSync } from "node:fs";
import { renderMcpDeclarations } from "@codecell/mcp-declarations";
import { renderGuestDeclarations } from "@codecell/typecheck";

const catalogs = new URL("../../fixtures/mcp-catalogs/", import.meta.url);

export function capturedServers() {
  return readdirSync(catalogs)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => {
      const capture = JSON.parse(readFileSync(new URL(name, catalogs), "utf8"));
      return { name: capture.server, tools: capture.tools, resources: false, prompts: false };
    });
}

const readFile = {
  id: "core:read_file",
  name: "read_file",
  description: "Read a UTF-8 file of the workspace.",
  inputSchema: {
    type: "object",
    properties: { path: { type: "string" }, maxBytes: { type: "integer" } },
    required: ["path"],
  },
  outputSchema: {
    type: "object",
    properties: { path: { type: "string" }, content: { type: "string" }, bytes: { type: "integer" } },
    required: ["path", "content", "bytes"],
  },
};

function guest(tools, servers) {
  const mcp = renderMcpDeclarations(servers);
  return renderGuestDeclarations({
    tools,
    toolFunctions: tools.map((tool) => ({ name: tool.name, toolId: tool.id })),
    mcp,
    mcpAliases: mcp.servers.map((server) => ({
      identifier: server.identifier,
      tools: server.tools.map((tool) => ({ identifier: tool.identifier, aliases: [tool.name] })),
    })),
    namespaces: [
      { globalName: "Notes", scope: { list: { $codecellCall: "list" }, add: { $codecellCall: "add" } } },
    ],
    callMarkerKey: "$codecellCall",
  });
}

/** The 97 real MCP tools, as MCP.<server>, beside core:read_file and the Notes namespace. */
export function realGuest() {
  return guest([readFile], capturedServers());
}

/** 1,000 synthetic catalog tools (tools.call by id and a shortcut each) and the real MCP servers. */
export function syntheticGuest(count = 1000) {
  const tools = [readFile];
  for (let index = 0; index < count - 1; index++) {
    tools.push({
      id: `plugin:synthetic:tool_${index}`,
      name: `tool_${index}`,
      description: `Synthetic tool ${index}: does thing ${index % 17} to a record.`,
      inputSchema: {
        type: "object",
        properties: {
          id: { type: "string", description: "The record id." },
          limit: { type: "integer", minimum: 1, maximum: 100 },
          mode: { enum: ["fast", "exact", "lazy"] },
          tags: { type: "array", items: { type: "string" } },
          options: { type: "object", properties: { dryRun: { type: "boolean" }, note: { type: "string" } } },
        },
        required: ["id"],
      },
    });
  }
  return guest(tools, capturedServers());
}

/** A 30-line cell as a model writes it, against the real guest; `variant` makes each text new. */
export function thirtyLineCell(variant) {
  return `// Find what the memory graph knows about the project and file it as a note.
const query = "codecell ${variant}";
const graph = await MCP.memory.searchNodes({ query });
const names = [];
for (const entity of graph.structuredContent?.entities ?? []) {
  names.push(entity.name);
}
const file = await tools.read_file({ path: "README.md", maxBytes: 4096 });
const firstLine = file.content.split("\\n")[0];
const [docs, issues] = await Promise.all([
  MCP.context7.resolveLibraryId({ libraryName: "typescript", query: "diagnostics" }),
  MCP.github.searchIssues({ q: "repo:microsoft/TypeScript checkJs", per_page: 5 }),
]);
const docText = docs.content?.map((item) => (item.type === "text" ? item.text : "")).join("\\n") ?? "";
const summary = {
  query,
  names,
  firstLine,
  bytes: file.bytes,
  docChars: docText.length,
  issues: issues.isError ? 0 : 1,
};
if (names.length === 0) {
  await MCP.memory.createEntities({
    entities: [{ name: "codecell", entityType: "project", observations: [firstLine] }],
  });
}
const notes = await Notes.list();
text(\`\${names.length} names, \${notes.length} notes\`);
json(summary);
const matches = ALL_TOOLS.filter((tool) => tool.name.includes("read")).map((tool) => tool.id);
return { ...summary, matches, variant: ${variant} };
`;
}
