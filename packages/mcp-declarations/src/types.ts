/** One tool as an MCP server's `tools/list` returns it. Schemas are whatever the server sent. */
export type McpToolDefinition = {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: {
    title?: string;
    readOnlyHint?: boolean;
    destructiveHint?: boolean;
    idempotentHint?: boolean;
    openWorldHint?: boolean;
    [key: string]: unknown;
  };
};

/** What the host knows about one connected MCP server: the input of the declaration generator. */
export type McpServerDescription = {
  /** The server id from the config (the key of `mcpServers`). */
  name: string;
  /** A human title, from the server's `serverInfo` when it has one. */
  title?: string;
  /** The server's own usage instructions from `initialize`. */
  instructions?: string;
  tools: McpToolDefinition[];
  /** True when the server offers resources (`resources/list`, `resources/read`). */
  resources: boolean;
  /** True when the server offers prompts (`prompts/list`, `prompts/get`). */
  prompts: boolean;
};

/** One virtual, read-only API file. */
export type McpApiFile = { path: string; description: string; content: string };

/** A tool as declared: how guest code names it and the text `$api(tool)` returns. */
export type McpDeclaredTool = {
  /** The MCP tool name, as the server knows it. */
  name: string;
  /** The camelCase member name under `MCP.<server>`. */
  identifier: string;
  /** Its declaration block (JSDoc, signature, and the named types it uses). */
  declaration: string;
  inputSchema: unknown;
  outputSchema?: unknown;
};

export type McpDeclaredServer = {
  /** The server id from the config. */
  name: string;
  /** The member name under `MCP`. */
  identifier: string;
  /** The virtual file that declares it, `mcp/<identifier>.d.ts`. */
  path: string;
  title?: string;
  resources: boolean;
  prompts: boolean;
  tools: McpDeclaredTool[];
  /** The whole declaration file: what `$api()` without a tool name returns. */
  header: string;
};

export type McpDeclarations = {
  /** `mcp/index.d.ts` first, then one `mcp/<identifier>.d.ts` per server, in input order. */
  files: McpApiFile[];
  servers: McpDeclaredServer[];
};

export type RenderOptions = {
  /** Characters one tool's declaration may take before it is simplified. Default 6000. */
  maxToolChars?: number;
  /** Deepest nesting of objects and arrays rendered in full. Default 8. */
  maxDepth?: number;
  /** Schema nodes visited per tool before the rest degrades to `unknown`. Default 600. */
  maxNodes?: number;
};
