import { jsDoc, oneLine, truncate } from "./comments.js";
import { IdentifierAllocator, RESERVED_TOOL_IDENTIFIERS, toPascalCase } from "./identifiers.js";
import { INDEX_PATH, renderIndexFile, sharedTypesFor, sharedTypesNamedIn } from "./index-file.js";
import { NamedTypes } from "./named-types.js";
import { type PrinterLimits, SchemaPrinter, schemaDocLines, unresolvedRefsNote } from "./schema-printer.js";
import type {
  McpApiFile,
  McpDeclarations,
  McpDeclaredServer,
  McpDeclaredTool,
  McpServerDescription,
  McpToolDefinition,
  RenderOptions,
} from "./types.js";

const DEFAULTS = { maxToolChars: 6000, maxDepth: 8, maxNodes: 600 };
const MAX_DESCRIPTION_CHARS = 2000;
const MAX_INSTRUCTIONS_CHARS = 2000;
const INLINE_RESULT_CHARS = 60;

/**
 * MCP servers to the virtual declaration files guest code reads with `API.read`: `mcp/index.d.ts`
 * (the servers and the shared result types) and one `mcp/<server>.d.ts` per server, declaring
 * `namespace MCP.<server>` with `$api`, one function per tool, and `resources` / `prompts` when offered.
 * Identifiers are unique camelCase and never reserved words. Never throws on a malformed schema.
 */
export function renderMcpDeclarations(
  servers: readonly McpServerDescription[],
  options: RenderOptions = {},
): McpDeclarations {
  const limits = { ...DEFAULTS, ...options };
  const serverIds = new IdentifierAllocator();
  const declared: McpDeclaredServer[] = [];
  for (const server of servers) {
    const identifier = serverIds.allocate(String(server.name));
    declared.push(renderServer(server, identifier, limits));
  }
  const files: McpApiFile[] = [{ path: INDEX_PATH, description: indexDescription(declared), content: "" }];
  files[0]!.content = renderIndexFile(declared);
  for (const server of declared) {
    files.push({ path: server.path, description: serverDescription(server), content: server.header });
  }
  return { files, servers: declared };
}

function indexDescription(servers: McpDeclaredServer[]): string {
  if (servers.length === 0) return "No MCP servers are visible in this run.";
  const list = servers.map((server) => server.identifier).join(", ");
  return `The ${servers.length} visible MCP server${servers.length === 1 ? "" : "s"} (${list}) and the result types every call shares.`;
}

function serverDescription(server: McpDeclaredServer): string {
  const parts = [`${server.tools.length} tool${server.tools.length === 1 ? "" : "s"}`];
  if (server.resources) parts.push("resources");
  if (server.prompts) parts.push("prompts");
  const title = server.title ? ` (${oneLine(server.title)})` : "";
  return `MCP.${server.identifier}${title}: ${parts.join(", ")}.`;
}

function renderServer(
  server: McpServerDescription,
  identifier: string,
  limits: typeof DEFAULTS,
): McpDeclaredServer {
  const toolIds = new IdentifierAllocator(RESERVED_TOOL_IDENTIFIERS);
  const named = new NamedTypes();
  const tools: Array<McpDeclaredTool & { uses: Set<string>; block: string }> = [];
  for (const tool of Array.isArray(server.tools) ? server.tools : []) {
    const toolIdentifier = toolIds.allocate(String(tool.name));
    const rendered = renderTool(tool, toolIdentifier, named, limits);
    tools.push({
      name: String(tool.name),
      identifier: toolIdentifier,
      declaration: "",
      inputSchema: tool.inputSchema,
      ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
      uses: rendered.uses,
      block: rendered.text,
    });
  }

  const path = `mcp/${identifier}.d.ts`;
  const title = typeof server.title === "string" && server.title.trim() !== "" ? server.title : undefined;
  const lines: string[] = [];
  const summary = `MCP server "${oneLine(String(server.name))}"${title ? ` (${oneLine(title)})` : ""}`;
  lines.push(`// ${summary}: ${tools.length} tool${tools.length === 1 ? "" : "s"}.`);
  lines.push(`// Call a tool as MCP.${identifier}.<tool>({ ...input }); every call returns a promise.`);
  lines.push("");
  const instructions =
    typeof server.instructions === "string" && server.instructions.trim() !== ""
      ? ["Server instructions:", "", truncate(server.instructions.trim(), MAX_INSTRUCTIONS_CHARS)]
      : [];
  let text = lines.join("\n") + "\n" + jsDoc(instructions, "");
  text += `declare namespace MCP.${identifier} {\n`;
  text += jsDoc(
    [
      "This file as text; with a tool name (MCP or camelCase), that tool's declaration only.",
      "`schema: true` appends the tool's JSON Schemas.",
    ],
    "  ",
  );
  text += "  function $api(toolName?: string, options?: { schema?: boolean }): Promise<McpApiHeader>;\n";
  for (const tool of tools) text += "\n" + tool.block;
  if (server.resources) text += "\n" + RESOURCES_BLOCK;
  if (server.prompts) text += "\n" + PROMPTS_BLOCK;
  named.breakUnguardedCycles();
  const aliases = named.all();
  if (aliases.length > 0) text += "\n  // Types used above.\n" + aliases.join("");
  text += sharedTypesBlock(text);
  text += "}\n";

  return {
    name: String(server.name),
    identifier,
    path,
    ...(title ? { title } : {}),
    resources: server.resources === true,
    prompts: server.prompts === true,
    tools: tools.map(({ uses, block, ...tool }) => ({
      ...tool,
      declaration: block + named.closure(uses).join(""),
    })),
    header: text,
  };
}

/**
 * The shared MCP result types a namespace body names, declared inside it: a server file and a tool's
 * `$api` text type-check on their own, without `mcp/index.d.ts` beside them.
 */
export function sharedTypesBlock(body: string): string {
  const shared = sharedTypesFor(sharedTypesNamedIn(body), "  ");
  return shared === ""
    ? ""
    : `\n  // MCP result types (the same as in mcp/index.d.ts), so this text stands alone.\n${shared}`;
}

const RESOURCES_BLOCK = `  namespace resources {
    /** Every resource and resource template the server lists (all pages). */
    function list(): Promise<McpResourceList>;
    /** One resource's contents by URI. */
    function read(input: { uri: string }): Promise<McpResourceContents>;
  }
`;

const PROMPTS_BLOCK = `  namespace prompts {
    /** Every prompt the server lists (all pages), with its arguments. */
    function list(): Promise<McpPromptList>;
    /** One prompt, rendered with string arguments. */
    function get(input: { name: string; arguments?: Record<string, string> }): Promise<McpPromptResult>;
  }
`;

type RenderedTool = { text: string; uses: Set<string> };

/**
 * One tool's declaration. A declaration over the size budget is rendered again shallower without
 * property docs, and at last as an untyped object: a huge schema costs readability, never a failure.
 */
function renderTool(
  tool: McpToolDefinition,
  identifier: string,
  named: NamedTypes,
  limits: typeof DEFAULTS,
): RenderedTool {
  const attempts: Array<PrinterLimits | undefined> = [
    { maxDepth: limits.maxDepth, maxNodes: limits.maxNodes, propertyDocs: true },
    { maxDepth: Math.min(3, limits.maxDepth), maxNodes: Math.min(150, limits.maxNodes), propertyDocs: false },
    undefined,
  ];
  for (const attempt of attempts) {
    const checkpoint = named.checkpoint();
    try {
      const rendered = attempt
        ? renderToolWith(tool, identifier, named, attempt)
        : untypedTool(tool, identifier);
      const size = rendered.text.length + named.closure(rendered.uses).join("").length;
      if (size <= limits.maxToolChars || attempt === undefined) return rendered;
    } catch {
      // A schema the printer cannot walk (a cycle in a host object, say) falls through to the next form.
    }
    named.rollback(checkpoint);
  }
  return untypedTool(tool, identifier);
}

function toolDocLines(tool: McpToolDefinition): string[] {
  const lines: string[] = [];
  const description = typeof tool.description === "string" ? tool.description.trim() : "";
  const title = typeof tool.title === "string" ? tool.title : tool.annotations?.title;
  if (description !== "") lines.push(truncate(description, MAX_DESCRIPTION_CHARS));
  else if (typeof title === "string" && title.trim() !== "") lines.push(title.trim());
  const hints: string[] = [];
  const annotations = tool.annotations;
  if (annotations?.readOnlyHint === true) hints.push("read-only");
  else if (annotations?.destructiveHint === true) hints.push("destructive");
  if (annotations?.idempotentHint === true) hints.push("idempotent");
  if (annotations?.openWorldHint === true) hints.push("open world");
  const name = `MCP tool ${JSON.stringify(String(tool.name))}`;
  lines.push(hints.length > 0 ? `${name} (${hints.join(", ")}).` : `${name}.`);
  return lines;
}

function renderToolWith(
  tool: McpToolDefinition,
  identifier: string,
  named: NamedTypes,
  limits: PrinterLimits,
): RenderedTool {
  const pascal = toPascalCase(identifier);
  const input = new SchemaPrinter(tool.inputSchema, named, limits, `${pascal}Input`);
  const top = input.topLevelObject(tool.inputSchema, 1);
  let parameter: string;
  const params: string[] = [];
  if (top) {
    parameter = `input${top.required === 0 ? "?" : ""}: ${top.type}`;
    const properties = (tool.inputSchema as { properties?: unknown }).properties;
    if (typeof properties === "object" && properties !== null) {
      for (const [key, value] of Object.entries(properties)) {
        const doc = schemaDocLines(value).filter((line) => line !== "@deprecated");
        if (doc.length > 0) params.push(`@param ${oneLine(key)} ${oneLine(doc.join(". "))}`);
      }
    }
  } else {
    parameter = `input: ${input.type(tool.inputSchema, 1)}`;
  }

  const uses = new Set(input.uses);
  let result = "McpToolResult";
  let degraded = input.degraded;
  let output: SchemaPrinter | undefined;
  if (tool.outputSchema !== undefined) {
    const printer = new SchemaPrinter(tool.outputSchema, named, limits, `${pascal}Output`);
    output = printer;
    let type = printer.type(tool.outputSchema, 1);
    degraded ||= printer.degraded;
    for (const name of printer.uses) uses.add(name);
    if (type.includes("\n") || type.length > INLINE_RESULT_CHARS) {
      const outputName = named.nameFor(
        `output:${identifier}:${JSON.stringify(tool.outputSchema)}`,
        `${pascal}Result`,
        (name) => ({
          text: `${jsDoc([`The structured result of ${identifier}.`], "  ")}  type ${name} = ${type};\n`,
          uses: new Set(printer.uses),
          unguardedUses: new Set(printer.unguardedUses),
        }),
      );
      if (outputName !== undefined) {
        uses.add(outputName);
        type = outputName;
      }
    }
    result = `McpToolResultOf<${type}>`;
  }

  const doc = toolDocLines(tool);
  const unresolved = new Set([...input.unresolvedRefs, ...(output?.unresolvedRefs ?? [])]);
  if (unresolved.size > 0) doc.push(unresolvedRefsNote(unresolved));
  if (degraded) {
    doc.push(
      `Parts of this schema are simplified; $api(${JSON.stringify(identifier)}, { schema: true }) has it whole.`,
    );
  }
  doc.push(...params);
  const text = `${jsDoc(doc, "  ")}  function ${identifier}(${parameter}): Promise<${result}>;\n`;
  return { text, uses };
}

function untypedTool(tool: McpToolDefinition, identifier: string): RenderedTool {
  const doc = toolDocLines(tool);
  doc.push(
    `Its schema is too large to declare; $api(${JSON.stringify(identifier)}, { schema: true }) has it.`,
  );
  const text = `${jsDoc(doc, "  ")}  function ${identifier}(input: Record<string, unknown>): Promise<McpToolResult>;\n`;
  return { text, uses: new Set() };
}
