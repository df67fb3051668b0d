import type { JsonValue } from "@codecell/contract";
import { isPlainIdentifier, type McpDeclarations, renderMcpDeclarations } from "@codecell/mcp-declarations";

/** A catalogued tool the guest reaches through `tools` (every source but MCP). */
export type GuestCatalogTool = {
  id: string;
  name: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
};

/** What a run shows its guest: the input of `renderGuestDeclarations`. */
export type GuestDeclarationInput = {
  /** The `ALL_TOOLS` tools, in catalog order. */
  tools: readonly GuestCatalogTool[];
  /** The `tools.<name>` shortcuts, each with the aliases the guest also answers to. */
  toolFunctions: ReadonlyArray<{ name: string; toolId: string; aliases?: readonly string[] }>;
  /** The run's MCP declarations: the same files `API.read` serves. */
  mcp: McpDeclarations;
  /** Other names the guest answers to under `MCP` (servers) and `MCP.<server>` (tools). */
  mcpAliases?: ReadonlyArray<{
    identifier: string;
    aliases?: readonly string[];
    tools: ReadonlyArray<{ identifier: string; aliases?: readonly string[] }>;
  }>;
  /** Visible plugin namespaces: their global and scope (JSON, callables as call markers). */
  namespaces: ReadonlyArray<{ globalName: string; scope: JsonValue }>;
  /** The key of a callable member in a namespace scope (`CALL_MARKER_KEY` of `@codecell/namespaces`). */
  callMarkerKey: string;
};

const CATALOG_NAMESPACE = "CodecellCatalog";

// The guest globals that do not depend on the run. Results of tools without an output schema are
// `any`: the guest gets whatever the tool returned, and a checker that guessed would flag honest cells.
const FIXED_GLOBALS = `interface CodecellToolEntry {
  id: string;
  name: string;
  label?: string;
  description: string;
  source: "core" | "plugin" | "mcp" | "client";
  sourceName: string;
}
/** What tools.describe answers: the entry with its input schema (JSON Schema) as \`parameters\`. */
interface CodecellDescribedTool extends CodecellToolEntry {
  parameters: any;
  outputSchema?: any;
}
/** One API.search answer: how a cell calls the MCP tool, and its signature on one line. */
interface CodecellMcpSearchHit {
  /** The call expression, such as \`MCP.memory.createEntities\`. */
  call: string;
  signature: string;
  description: string;
  /** The server's and the tool's own MCP names. */
  server: string;
  tool: string;
}
/** Only \`limit\` is read; other options are ignored, as the guest ignores them. */
interface CodecellSearchOptions {
  limit?: number;
  [option: string]: unknown;
}
/** The search as one object: search({ query, limit }). */
interface CodecellSearchQuery {
  query: string;
  limit?: number;
}
interface CodecellApiFile {
  path: string;
  description: string;
  bytes: number;
}
/** Every catalogued tool except MCP tools (frozen). */
declare const ALL_TOOLS: readonly CodecellToolEntry[];
declare const API: {
  /** The virtual declaration files at or under a prefix. */
  list(prefix?: string): Promise<CodecellApiFile[]>;
  /** One declaration file's text. */
  read(path: string): Promise<string>;
  /** Ranks the MCP tools: each answer says how a cell calls one. */
  search(query: string, options?: CodecellSearchOptions | number): Promise<CodecellMcpSearchHit[]>;
  search(query: CodecellSearchQuery): Promise<CodecellMcpSearchHit[]>;
};
/** Adds a text output item. */
declare function text(value: unknown): void;
/** Adds a JSON output item. */
declare function json(value: unknown): void;
/** Pauses the run; it continues with wait({runId}). */
declare function yield_control(reason?: string): Promise<void>;
/**
 * Keeps a JSON value for later cells of this conversation (undefined deletes the key). Keys are 1 to
 * 256 characters.
 */
declare const store: {
  (key: string, value: unknown): Promise<void>;
  /** The keys stored in this conversation. */
  keys(): Promise<string[]>;
  /** Deletes a key; true when it was stored. */
  delete(key: string): Promise<boolean>;
};
/** A value an earlier cell of this conversation stored, or undefined when there is none. */
declare function load<T = any>(key: string): Promise<T | undefined>;
/**
 * Shows an image to the model (when the operator turned images on): a base64 data URL, an image content
 * item, or a tool result whose content holds image items.
 */
declare function image(source: string | { type: "image"; data: string; mimeType: string } | { content: any[] } | any[]): void;
declare const console: {
  log(...values: any[]): void;
  info(...values: any[]): void;
  warn(...values: any[]): void;
  error(...values: any[]): void;
  debug(...values: any[]): void;
};
// What QuickJS itself adds to the language (the library declares none of these).
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare function queueMicrotask(callback: () => void): void;
declare const performance: { now(): number; readonly timeOrigin: number };
// QuickJS has it; the compiler's library does not declare it yet.
interface RegExpConstructor {
  escape(value: string): string;
}
type CodecellResultOf<K> = K extends keyof CodecellToolResults ? CodecellToolResults[K] : any;
type CodecellArgsOf<K> = K extends keyof CodecellToolArgs ? CodecellToolArgs[K] : [input?: Record<string, any>];
type CodecellStructured<F extends (...args: any) => any> = NonNullable<Awaited<ReturnType<F>>["structuredContent"]>;
`;

/**
 * The declaration file of one run's guest, as a TypeScript global script: `tools` with a typed shortcut
 * per tool and `tools.call` typed by id, `ALL_TOOLS`, `API`, `text`/`json`/`yield_control`, `console`,
 * `MCP.<server>` from the run's MCP declarations (results typed where a tool has an `outputSchema`) and
 * plugin namespaces. Nothing in it is more than a model could read in the run (ALL_TOOLS,
 * `tools.describe`, `API.read`); tool input types come from the same JSON Schema printer as MCP's.
 */
export function renderGuestDeclarations(input: GuestDeclarationInput): string {
  const parts = [
    "// The guest globals of this run, for the type check of its cells.\n",
    FIXED_GLOBALS,
    catalogDeclarations(input),
    mcpDeclarations(input),
    namespaceDeclarations(input),
  ];
  return parts.join("\n");
}

/**
 * The catalog tools' input and output types, rendered as one pseudo MCP server whose tool names are the
 * catalog ids (so the identifiers are unique), then referred to by id from `tools.call` and by name
 * from the shortcuts.
 */
function catalogDeclarations(input: GuestDeclarationInput): string {
  const rendered = renderMcpDeclarations([
    {
      name: "catalog",
      tools: input.tools.map((tool) => ({
        name: tool.id,
        description: tool.description ?? "",
        inputSchema: tool.inputSchema ?? { type: "object" },
        ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
      })),
      resources: false,
      prompts: false,
    },
  ]);
  const server = rendered.servers[0]!;
  const body = server.header.replace(
    /^declare namespace MCP\.[A-Za-z0-9_$]+ \{$/m,
    `declare namespace ${CATALOG_NAMESPACE} {`,
  );
  const identifierOf = new Map(server.tools.map((tool) => [tool.name, tool.identifier]));
  const withOutput = new Set(
    input.tools.filter((tool) => tool.outputSchema !== undefined).map((tool) => tool.id),
  );

  // tools.call takes an id or a unique name; a name two tools share is left to the untyped fallback.
  const nameCounts = new Map<string, number>();
  for (const tool of input.tools) nameCounts.set(tool.name, (nameCounts.get(tool.name) ?? 0) + 1);
  const ids = new Set(input.tools.map((tool) => tool.id));
  const args: string[] = [];
  const results: string[] = [];
  const keyed = (key: string, id: string) => {
    const identifier = identifierOf.get(id);
    if (!identifier) return;
    args.push(`  ${JSON.stringify(key)}: Parameters<typeof ${CATALOG_NAMESPACE}.${identifier}>;`);
    if (withOutput.has(id)) {
      results.push(
        `  ${JSON.stringify(key)}: CodecellStructured<typeof ${CATALOG_NAMESPACE}.${identifier}>;`,
      );
    }
  };
  for (const tool of input.tools) keyed(tool.id, tool.id);
  for (const tool of input.tools) {
    if (nameCounts.get(tool.name) === 1 && !ids.has(tool.name)) keyed(tool.name, tool.id);
  }

  const members = [
    "  /** Ranks the catalog (MCP tools are under MCP and API.search). */",
    "  search(query: string, options?: CodecellSearchOptions | number): Promise<CodecellToolEntry[]>;",
    "  search(query: CodecellSearchQuery): Promise<CodecellToolEntry[]>;",
    "  /** A tool's entry with its input schema as `parameters`. */",
    "  describe(idOrName: string): Promise<CodecellDescribedTool>;",
    "  /** Runs a tool by id or unique name. */",
    "  call<K extends string>(idOrName: K, ...input: CodecellArgsOf<K>): Promise<CodecellResultOf<K>>;",
  ];
  for (const shortcut of input.toolFunctions) {
    if (!identifierOf.has(shortcut.toolId)) continue;
    const id = JSON.stringify(shortcut.toolId);
    for (const name of [shortcut.name, ...(shortcut.aliases ?? [])]) {
      members.push(
        `  ${JSON.stringify(name)}(...input: CodecellArgsOf<${id}>): Promise<CodecellResultOf<${id}>>;`,
      );
    }
  }
  return [
    body,
    `interface CodecellToolArgs {\n${args.join("\n")}\n}`,
    `interface CodecellToolResults {\n${results.join("\n")}\n}`,
    `interface CodecellTools {\n${members.join("\n")}\n}`,
    "declare const tools: CodecellTools;",
    "",
  ].join("\n");
}

function mcpDeclarations(input: GuestDeclarationInput): string {
  if (input.mcp.servers.length === 0) {
    return `${input.mcp.files.map((file) => file.content).join("\n")}\n/** No MCP server is visible in this run. */\ndeclare const MCP: {};\n`;
  }
  const lines = input.mcp.files.map((file) => file.content);
  // The guest also answers to each server's and tool's own spelling (`MCP.memory.create_entities`).
  for (const server of input.mcpAliases ?? []) {
    const toolAliases: string[] = [];
    for (const tool of server.tools) {
      for (const alias of tool.aliases ?? []) {
        if (alias !== tool.identifier && isPlainIdentifier(alias)) {
          toolAliases.push(`  const ${alias}: typeof ${tool.identifier};`);
        }
      }
    }
    if (toolAliases.length > 0) {
      lines.push(`declare namespace MCP.${server.identifier} {\n${toolAliases.join("\n")}\n}`);
    }
    const serverAliases = (server.aliases ?? []).filter(
      (alias) => alias !== server.identifier && isPlainIdentifier(alias),
    );
    if (serverAliases.length > 0) {
      lines.push(
        `declare namespace MCP {\n${serverAliases.map((alias) => `  export import ${alias} = MCP.${server.identifier};`).join("\n")}\n}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}

function namespaceDeclarations(input: GuestDeclarationInput): string {
  const lines: string[] = [];
  const members: string[] = [];
  for (const namespace of input.namespaces) {
    if (!isPlainIdentifier(namespace.globalName)) continue;
    lines.push(
      `declare const ${namespace.globalName}: ${scopeType(namespace.scope, input.callMarkerKey, 0)};`,
    );
    members.push(`  readonly ${namespace.globalName}: typeof ${namespace.globalName};`);
  }
  lines.push(`declare const namespaces: {\n${members.join("\n")}\n};`);
  return `${lines.join("\n")}\n`;
}

/**
 * A namespace scope's type: each call marker a function (its arguments pass through the plugin's own
 * mapper, so they stay untyped), plain data as the frozen values the guest sees.
 */
function scopeType(value: JsonValue, marker: string, depth: number): string {
  if (value === null) return "null";
  if (typeof value === "string") return "string";
  if (typeof value === "number") return "number";
  if (typeof value === "boolean") return "boolean";
  if (Array.isArray(value)) return "readonly any[]";
  if (depth > 8) return "any";
  if (typeof value[marker] === "string") return "(...args: any[]) => Promise<any>";
  const indent = "  ".repeat(depth + 1);
  const entries = Object.entries(value).map(
    ([key, member]) => `${indent}readonly ${JSON.stringify(key)}: ${scopeType(member, marker, depth + 1)};`,
  );
  return entries.length === 0 ? "{}" : `{\n${entries.join("\n")}\n${"  ".repeat(depth)}}`;
}
