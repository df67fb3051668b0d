import type { CodeModeLanguage } from "@codecell/contract";

export type Example = {
  id: string;
  title: string;
  /** One line under the menu: what the cell shows. */
  summary: string;
  language: CodeModeLanguage;
  code: string;
};

/**
 * Cells that run as they stand against the gateway's embedded default config: the demo workspace's
 * core tools, the notes plugin and its `Notes` namespace, and the memory MCP server.
 */
export const EXAMPLES: readonly Example[] = [
  {
    id: "search-then-call",
    title: "Search, then call",
    summary: "Find a tool with tools.search, read its schema, call it by id and total a CSV.",
    language: "javascript",
    code: `// Find a tool by what it does, then call it by its catalog id.
const hits = await tools.search("read a text file");
const tool = await tools.describe(hits[0].id);
text(\`using \${tool.id}; it needs \${tool.parameters.required.join(", ")}\`);

const file = await tools.call(tool.id, { path: "data/sales.csv" });
const totals = {};
for (const line of file.content.trim().split("\\n").slice(1)) {
  const [region, , amount] = line.split(",");
  totals[region] = (totals[region] ?? 0) + Number(amount);
}
json(totals);
return { tool: tool.id, regions: Object.keys(totals).length, totals };
`,
  },
  {
    id: "mcp-declaration",
    title: "MCP call after its declaration",
    summary: "Read mcp/memory.d.ts from the virtual API files, then call the memory server through MCP.",
    language: "javascript",
    code: `// MCP tools are typed in virtual declaration files; read one, then call the server.
const files = await API.list("mcp");
text("API files: " + files.map((file) => file.path).join(", "));

const declaration = await API.read("mcp/memory.d.ts");
const signature = declaration.split("\\n").find((line) => line.includes("function createEntities"));
text(signature.trim());

await MCP.memory.createEntities({
  entities: [{ name: "playground", entityType: "page", observations: ["runs cells over MCP"] }],
});
const found = await MCP.memory.searchNodes({ query: "playground" });
return found.structuredContent.entities.map((entity) => entity.name);
`,
  },
  {
    id: "parallel",
    title: "Parallel calls (Promise.all)",
    summary: "Start four nested calls at once (core, plugin namespace, MCP) and join them.",
    language: "javascript",
    code: `// Nested calls run in parallel on the host; the cell awaits them together.
const [readme, todo, notes, graph] = await Promise.all([
  tools.read_file({ path: "README.md" }),
  tools.read_file({ path: "todo.md" }),
  Notes.list(),
  MCP.memory.readGraph({}),
]);
return {
  readmeTitle: readme.content.split("\\n")[0],
  openTodos: todo.content.split("\\n").filter((line) => line.startsWith("- [ ]")).length,
  notes: notes.map((note) => note.title),
  entities: graph.structuredContent.entities.length,
};
`,
  },
  {
    id: "namespace",
    title: "Namespace call (Notes)",
    summary: "The notes plugin's Notes namespace: add a note, then search for it.",
    language: "javascript",
    code: `// Plugins can register a concise namespace; Notes comes from the example notes plugin.
const added = await Notes.add({
  title: "Playground visit",
  body: "Tried a namespace call from the playground.",
  tags: ["playground"],
});
text(\`added \${added.id}\`);
const matches = await Notes.search("playground");
return matches.map((note) => ({ id: note.id, title: note.title }));
`,
  },
  {
    id: "yield-then-wait",
    title: "yield_control, then Wait",
    summary: "The cell suspends itself; the result is waiting until you press Wait.",
    language: "javascript",
    code: `// yield_control suspends the run: exec returns "waiting" with a runId, and wait resumes it.
const todo = await tools.read_file({ path: "todo.md" });
const open = todo.content.split("\\n").filter((line) => line.startsWith("- [ ]"));
text(\`\${open.length} open items; pausing for review\`);

await yield_control("review the open items, then press Wait");

text("resumed by wait");
return open.map((line) => line.slice(6));
`,
  },
  {
    id: "typescript",
    title: "TypeScript cell",
    summary: "Types are stripped before the cell runs; line numbers stay where you wrote them.",
    language: "typescript",
    code: `// Switch the language to TypeScript: interfaces, generics and annotations are allowed.
interface Sale {
  region: string;
  month: string;
  amount: number;
}

function groupBy<T, K extends string>(items: T[], key: (item: T) => K): Record<K, T[]> {
  const groups = {} as Record<K, T[]>;
  for (const item of items) (groups[key(item)] ??= []).push(item);
  return groups;
}

const file = (await tools.read_file({ path: "data/sales.csv" })) as { content: string };
const sales: Sale[] = file.content.trim().split("\\n").slice(1).map((line: string) => {
  const [region, month, amount] = line.split(",");
  return { region, month, amount: Number(amount) };
});
const byMonth = groupBy(sales, (sale) => sale.month);
return Object.entries(byMonth).map(([month, rows]) => ({
  month,
  total: rows.reduce((sum, row) => sum + row.amount, 0),
}));
`,
  },
  {
    id: "fails-with-code",
    title: "Failure with a clear code",
    summary: "Cells have no module loader: import() is refused with module_access_denied.",
    language: "javascript",
    code: `// Cells run without a module loader. This one fails before it starts:
// the result is "failed" with the code module_access_denied and the line.
const total = 1 + 1;
const fs = await import("node:fs");
return fs.readFileSync("/etc/hostname", "utf8");
`,
  },
];

export function exampleById(id: string): Example | undefined {
  return EXAMPLES.find((example) => example.id === id);
}
