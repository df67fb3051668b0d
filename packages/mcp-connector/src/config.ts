import { CodeModeError } from "@codecell/contract";

/** A server launched as a child process speaking MCP over stdio. */
export type McpStdioServerConfig = {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Deadline for `initialize` and the first tool listing, in ms; default the connector's (30000). */
  connectTimeoutMs?: number;
};

/** A remote server: Streamable HTTP, falling back to the legacy SSE transport. */
export type McpHttpServerConfig = {
  url: string;
  headers?: Record<string, string>;
  /** Force one transport instead of trying Streamable HTTP first. */
  transport?: "streamable-http" | "sse";
  /** Deadline for `initialize` and the first tool listing, in ms; default the connector's (30000). */
  connectTimeoutMs?: number;
};

/** One entry of the `mcpServers` object MCP clients already use. */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

export function isStdioConfig(config: McpServerConfig): config is McpStdioServerConfig {
  return typeof (config as McpStdioServerConfig).command === "string";
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((entry) => typeof entry === "string")
  );
}

/** Checks one server entry, with an `invalid_config` error naming the server and the field. */
export function validateServerConfig(id: string, config: unknown): McpServerConfig {
  const fail = (message: string): never => {
    throw new CodeModeError("invalid_config", `mcpServers.${id}: ${message}`, { server: id });
  };
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    return fail('expected an object with "command" (stdio) or "url" (HTTP).');
  }
  const entry = config as Record<string, unknown>;
  if (
    entry.connectTimeoutMs !== undefined &&
    !(Number.isInteger(entry.connectTimeoutMs) && (entry.connectTimeoutMs as number) > 0)
  ) {
    fail('"connectTimeoutMs" must be a positive whole number of milliseconds.');
  }
  if (typeof entry.command === "string") {
    if (entry.command.trim() === "") fail('"command" is empty.');
    if (
      entry.args !== undefined &&
      !(Array.isArray(entry.args) && entry.args.every((a) => typeof a === "string"))
    ) {
      fail('"args" must be an array of strings.');
    }
    if (entry.env !== undefined && !isStringRecord(entry.env)) fail('"env" must map names to string values.');
    if (entry.cwd !== undefined && typeof entry.cwd !== "string") fail('"cwd" must be a string.');
    return entry as McpStdioServerConfig;
  }
  if (typeof entry.url === "string") {
    try {
      const url = new URL(entry.url);
      if (url.protocol !== "http:" && url.protocol !== "https:")
        fail(`"url" must be http or https, got ${url.protocol}`);
    } catch (error) {
      if (CodeModeError.is(error)) throw error;
      fail(`"url" is not a valid URL: ${JSON.stringify(entry.url)}.`);
    }
    if (entry.headers !== undefined && !isStringRecord(entry.headers))
      fail('"headers" must map names to strings.');
    if (entry.transport !== undefined && entry.transport !== "streamable-http" && entry.transport !== "sse") {
      fail('"transport" is "streamable-http" or "sse".');
    }
    return entry as McpHttpServerConfig;
  }
  return fail('expected "command" (a stdio server) or "url" (an HTTP server).');
}
