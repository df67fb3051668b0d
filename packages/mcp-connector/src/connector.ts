import { CodeModeError, closestMatches, type HostTool } from "@codecell/contract";
import type { McpServerDescription } from "@codecell/mcp-declarations";
import type { CallToolResult, GetPromptResult, ReadResourceResult } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { type McpServerConfig, validateServerConfig } from "./config.js";
import {
  type ConnectionSettings,
  type ConnectionState,
  describeError,
  ServerConnection,
} from "./server-connection.js";
import { prepareToolInput } from "./tool-input.js";
import { traceMcpRequest } from "./tracing.js";

/** `params._meta` with the request's trace context, when there is one (the MCP conventions' proposal). */
function withMeta(meta: Record<string, string>): { _meta?: Record<string, string> } {
  return meta.traceparent === undefined ? {} : { _meta: meta };
}

export type McpConnectorOptions = {
  /** The name and version this client gives in `initialize`. */
  clientName?: string;
  clientVersion?: string;
  /** Per call, unless the call says otherwise. Default 60000. */
  callTimeoutMs?: number;
  /** For `initialize` and the first listings. Default 30000. */
  connectTimeoutMs?: number;
  /** First and largest delay before reconnecting a server that exited. Defaults 500 and 30000. */
  reconnectInitialDelayMs?: number;
  reconnectMaxDelayMs?: number;
  /** How much of a stdio server's stderr is kept for failure messages. Default 2000 characters. */
  stderrTailChars?: number;
};

export type McpCallOptions = {
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Hears the server's progress notifications for this call (the connector asks for them with a token). */
  onProgress?: (update: { progress: number; total?: number; message?: string }) => void;
};

/** A log message a server sent (`notifications/message`). */
export type McpLogMessage = { server: string; level: string; logger?: string; data: unknown };

export type McpConnectorDiagnostic = { server: string; message: string };

export type McpServerStatus = {
  server: string;
  state: ConnectionState;
  transport?: "stdio" | "streamable-http" | "sse";
  /** `modern` for a server that speaks only the 2026-07-28 protocol, `legacy` for the session era. */
  era?: "legacy" | "modern";
  pid?: number;
  tools: number;
  lastError?: string;
};

export type McpResourceListing = {
  resources: Array<{ uri: string; name: string; [key: string]: unknown }>;
  resourceTemplates: Array<{ uriTemplate: string; name: string; [key: string]: unknown }>;
};

export type McpPromptListing = { prompts: Array<{ name: string; [key: string]: unknown }> };

/**
 * `connected` and `failed` are a late server's start settling after `start()` returned (it stopped
 * waiting at `waitMs`); `tools_changed` is a server's own list_changed; `disconnected` an exit.
 */
export type McpChangeEvent = {
  server: string;
  reason: "tools_changed" | "disconnected" | "connected" | "failed";
};

export type McpStartOptions = {
  /**
   * How long `start()` waits for the servers; those still starting then go on in the background, each
   * within its own deadline, and report with an `onChange` event (`connected` or `failed`). Default:
   * wait until every server has connected or failed.
   */
  waitMs?: number;
};

export interface McpConnector {
  /**
   * Connects every server at once, each within its deadline (`connectTimeoutMs`); one that fails
   * becomes a diagnostic (its process stopped) and the others stay usable.
   */
  start(options?: McpStartOptions): Promise<void>;
  readonly diagnostics: McpConnectorDiagnostic[];
  status(): McpServerStatus[];
  /** The connected servers, as `renderMcpDeclarations` takes them. */
  describeServers(): McpServerDescription[];
  /** Every listed tool as a catalog tool of source `mcp`, owner the server id. */
  hostTools(): HostTool[];
  callTool(
    server: string,
    toolName: string,
    input: unknown,
    options?: McpCallOptions,
  ): Promise<CallToolResult>;
  listResources(server: string, options?: McpCallOptions): Promise<McpResourceListing>;
  readResource(server: string, input: unknown, options?: McpCallOptions): Promise<ReadResourceResult>;
  listPrompts(server: string, options?: McpCallOptions): Promise<McpPromptListing>;
  getPrompt(server: string, input: unknown, options?: McpCallOptions): Promise<GetPromptResult>;
  /** Called when a server's tool list changes or it disconnects; returns the unsubscribe function. */
  onChange(listener: (event: McpChangeEvent) => void): () => void;
  /** Called with every log message a server sends; returns the unsubscribe function. */
  onLog(listener: (message: McpLogMessage) => void): () => void;
  close(): Promise<void>;
}

const MAX_PAGES = 100;

/**
 * MCP servers from an `mcpServers`-shaped config as one tool source. Nothing connects until `start()`.
 * Calls check their input, forward it, and return the server's result as it came (an `isError` result
 * is returned, not thrown); transport failures, exits and timeouts become `nested_tool_failed`.
 */
export function createMcpConnector(
  servers: Record<string, McpServerConfig>,
  options: McpConnectorOptions = {},
): McpConnector {
  const settings: ConnectionSettings = {
    clientName: options.clientName ?? "codecell",
    clientVersion: options.clientVersion ?? "0.1.0",
    connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
    stderrTailChars: options.stderrTailChars ?? 2000,
    reconnectInitialDelayMs: options.reconnectInitialDelayMs ?? 500,
    reconnectMaxDelayMs: options.reconnectMaxDelayMs ?? 30_000,
  };
  const callTimeoutMs = options.callTimeoutMs ?? 60_000;
  const listeners = new Set<(event: McpChangeEvent) => void>();
  const diagnostics: McpConnectorDiagnostic[] = [];
  const emit = (event: McpChangeEvent) => {
    for (const listener of [...listeners]) {
      try {
        listener(event);
      } catch {
        // A listener's bug must not stop the others or the connection.
      }
    }
  };
  const logListeners = new Set<(message: McpLogMessage) => void>();
  const emitLog = (message: McpLogMessage) => {
    for (const listener of [...logListeners]) {
      try {
        listener(message);
      } catch {
        // As above: one listener's bug must not stop the others.
      }
    }
  };
  const connections = new Map<string, ServerConnection>();
  for (const [id, config] of Object.entries(servers)) {
    const checked = validateServerConfig(id, config);
    const created = new ServerConnection(
      id,
      checked,
      settings,
      (connection) => emit({ server: connection.id, reason: "tools_changed" }),
      (connection, reason) => {
        diagnostics.push({ server: connection.id, message: `disconnected: ${reason}` });
        emit({ server: connection.id, reason: "disconnected" });
      },
    );
    created.onLog = emitLog;
    connections.set(id, created);
  }

  function connection(server: string): ServerConnection {
    const found = connections.get(server);
    if (found) return found;
    const suggestions = closestMatches(server, connections.keys());
    const hint =
      suggestions.length > 0 ? ` Did you mean ${suggestions.map((s) => `"${s}"`).join(" or ")}?` : "";
    throw new CodeModeError(
      "invalid_input",
      `No MCP server "${server}".${hint} Configured: ${[...connections.keys()].join(", ") || "(none)"}.`,
      { server, suggestions },
    );
  }

  /** Runs one request with the call's timeout and signal, mapping failures to the project's codes. */
  async function request<T>(
    target: ServerConnection,
    what: string,
    options: McpCallOptions,
    mcp: { method: string; name?: string },
    run: (
      requestOptions: {
        signal?: AbortSignal;
        timeout: number;
        onprogress?: (update: { progress: number; total?: number; message?: string }) => void;
        resetTimeoutOnProgress?: boolean;
      },
      /** The request's `params._meta` trace context (`traceparent`), empty when nobody traces. */
      meta: Record<string, string>,
    ) => Promise<T>,
  ): Promise<T> {
    if (options.signal?.aborted) throw new CodeModeError("aborted", `${what} was aborted before it started.`);
    await target.ensureReady();
    return traceMcpRequest(mcp.method, mcp.name, target.traceTarget(), (meta) =>
      requestOnce(target, what, options, meta, run),
    );
  }

  async function requestOnce<T>(
    target: ServerConnection,
    what: string,
    options: McpCallOptions,
    meta: Record<string, string>,
    run: Parameters<typeof request<T>>[4],
  ): Promise<T> {
    const timeout = options.timeoutMs ?? callTimeoutMs;
    try {
      const onProgress = options.onProgress;
      return await run(
        {
          timeout,
          ...(options.signal ? { signal: options.signal } : {}),
          // A server that reports progress is alive: its call's timeout starts again with each report.
          ...(onProgress
            ? {
                onprogress: ({ progress, total, message }) =>
                  onProgress({
                    progress,
                    ...(total !== undefined ? { total } : {}),
                    ...(message !== undefined ? { message } : {}),
                  }),
                resetTimeoutOnProgress: true,
              }
            : {}),
        },
        meta,
      );
    } catch (error) {
      if (options.signal?.aborted) {
        throw new CodeModeError("aborted", `${what} was aborted; the server was told to cancel it.`, {
          server: target.id,
        });
      }
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        throw target.failure(`${what} got no answer within ${timeout} ms; the server was told to cancel it`);
      }
      if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
        // Give the exit's stderr a moment to land in the tail.
        await new Promise((resolve) => setTimeout(resolve, 50));
        throw target.failure(`${what} failed: the server exited or closed the connection mid-call`);
      }
      throw target.failure(`${what} failed: ${describeError(error)}`);
    }
  }

  async function paginate<T>(
    fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; next?: string }>,
  ) {
    const items: T[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const result = await fetchPage(cursor);
      items.push(...result.items);
      cursor = result.next;
      if (cursor === undefined) break;
    }
    return items;
  }

  function requireCapability(target: ServerConnection, kind: "resources" | "prompts"): void {
    const offered = kind === "resources" ? target.offersResources : target.offersPrompts;
    if (target.state === "ready" && !offered) {
      throw new CodeModeError("invalid_input", `MCP server "${target.id}" offers no ${kind}.`, {
        server: target.id,
      });
    }
  }

  function objectInput(label: string, input: unknown): Record<string, unknown> {
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      throw new CodeModeError("invalid_input", `${label} takes one object argument.`, { call: label });
    }
    return input as Record<string, unknown>;
  }

  return {
    async start(startOptions = {}) {
      let returned = false;
      const all = Promise.all(
        [...connections.values()].map(async (target) => {
          try {
            await target.connect();
            if (returned) emit({ server: target.id, reason: "connected" });
          } catch (error) {
            if (target.state === "closed") return;
            diagnostics.push({
              server: target.id,
              message: error instanceof Error ? error.message : String(error),
            });
            if (returned) emit({ server: target.id, reason: "failed" });
          }
        }),
      );
      const waitMs = startOptions.waitMs;
      if (waitMs === undefined) await all;
      else {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
        clearTimeout(timer);
      }
      returned = true;
    },

    get diagnostics() {
      return [...diagnostics];
    },

    status() {
      return [...connections.values()].map((target) => ({
        server: target.id,
        state: target.state,
        ...(target.transportKind ? { transport: target.transportKind } : {}),
        ...(target.era ? { era: target.era } : {}),
        ...(target.pid !== undefined ? { pid: target.pid } : {}),
        tools: target.tools.length,
        ...(target.lastError ? { lastError: target.lastError } : {}),
      }));
    },

    describeServers() {
      const described: McpServerDescription[] = [];
      for (const target of connections.values()) {
        // A server that never listed anything has nothing to declare; its diagnostic says why (or, while
        // it is still starting, the change event when it is ready).
        if (target.state === "idle") continue;
        if ((target.state === "failed" || target.state === "connecting") && target.tools.length === 0)
          continue;
        if (target.state === "closed") continue;
        described.push({
          name: target.id,
          ...(target.serverTitle ? { title: target.serverTitle } : {}),
          ...(target.instructions ? { instructions: target.instructions } : {}),
          tools: target.tools,
          resources: target.offersResources,
          prompts: target.offersPrompts,
        });
      }
      return described;
    },

    hostTools() {
      const tools: HostTool[] = [];
      for (const server of this.describeServers()) {
        for (const tool of server.tools) {
          const label = tool.title ?? tool.annotations?.title;
          tools.push({
            name: tool.name,
            ...(typeof label === "string" ? { label } : {}),
            description: tool.description ?? "",
            parameters: tool.inputSchema ?? { type: "object" },
            ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
            source: "mcp",
            owner: server.name,
          });
        }
      }
      return tools;
    },

    async callTool(server, toolName, input, callOptions = {}) {
      const target = connection(server);
      await target.ensureReady();
      const tool = target.tools.find((candidate) => candidate.name === toolName);
      if (!tool) {
        const names = target.tools.map((candidate) => candidate.name);
        const suggestions = closestMatches(toolName, names);
        const hint =
          suggestions.length > 0 ? ` Did you mean ${suggestions.map((s) => `"${s}"`).join(" or ")}?` : "";
        throw new CodeModeError("invalid_input", `MCP server "${server}" has no tool "${toolName}".${hint}`, {
          server,
          tool: toolName,
          suggestions,
        });
      }
      const prepared = prepareToolInput(`${server}.${toolName}`, tool.inputSchema, input);
      const method = { method: "tools/call", name: toolName };
      return request(target, `${server}.${toolName}`, callOptions, method, async (requestOptions, meta) => {
        const result = await target.client!.callTool(
          { name: toolName, arguments: prepared, ...withMeta(meta) },
          undefined,
          requestOptions,
        );
        return result as CallToolResult;
      });
    },

    async listResources(server, callOptions = {}) {
      const target = connection(server);
      requireCapability(target, "resources");
      const method = { method: "resources/list" };
      return request(target, `${server}.resources.list`, callOptions, method, async (requestOptions) => {
        const client = target.client!;
        const resources = await paginate(async (cursor) => {
          const page = await client.listResources(cursor === undefined ? {} : { cursor }, requestOptions);
          return { items: page.resources, ...(page.nextCursor ? { next: page.nextCursor } : {}) };
        });
        let resourceTemplates: McpResourceListing["resourceTemplates"] = [];
        try {
          resourceTemplates = await paginate(async (cursor) => {
            const page = await client.listResourceTemplates(
              cursor === undefined ? {} : { cursor },
              requestOptions,
            );
            return { items: page.resourceTemplates, ...(page.nextCursor ? { next: page.nextCursor } : {}) };
          });
        } catch (error) {
          // Templates are optional in the protocol; a server without them answers "method not found".
          if (!(error instanceof McpError && error.code === ErrorCode.MethodNotFound)) throw error;
        }
        return { resources, resourceTemplates };
      });
    },

    async readResource(server, input, callOptions = {}) {
      const target = connection(server);
      requireCapability(target, "resources");
      const { uri } = objectInput(`${server}.resources.read`, input);
      if (typeof uri !== "string" || uri === "") {
        throw new CodeModeError("invalid_input", `${server}.resources.read needs { uri: string }.`, {
          server,
        });
      }
      const method = { method: "resources/read" };
      return request(target, `${server}.resources.read`, callOptions, method, (requestOptions, meta) =>
        target.client!.readResource({ uri, ...withMeta(meta) }, requestOptions),
      );
    },

    async listPrompts(server, callOptions = {}) {
      const target = connection(server);
      requireCapability(target, "prompts");
      const method = { method: "prompts/list" };
      return request(target, `${server}.prompts.list`, callOptions, method, async (requestOptions) => {
        const client = target.client!;
        const prompts = await paginate(async (cursor) => {
          const page = await client.listPrompts(cursor === undefined ? {} : { cursor }, requestOptions);
          return { items: page.prompts, ...(page.nextCursor ? { next: page.nextCursor } : {}) };
        });
        return { prompts };
      });
    },

    async getPrompt(server, input, callOptions = {}) {
      const target = connection(server);
      requireCapability(target, "prompts");
      const { name, arguments: args } = objectInput(`${server}.prompts.get`, input);
      if (typeof name !== "string" || name === "") {
        throw new CodeModeError(
          "invalid_input",
          `${server}.prompts.get needs { name: string, arguments? }.`,
          { server },
        );
      }
      if (
        args !== undefined &&
        (typeof args !== "object" ||
          args === null ||
          Object.values(args).some((value) => typeof value !== "string"))
      ) {
        throw new CodeModeError(
          "invalid_input",
          `${server}.prompts.get: "arguments" maps names to strings.`,
          {
            server,
          },
        );
      }
      const method = { method: "prompts/get", name };
      return request(target, `${server}.prompts.get`, callOptions, method, (requestOptions, meta) =>
        target.client!.getPrompt(
          {
            name,
            ...(args !== undefined ? { arguments: args as Record<string, string> } : {}),
            ...withMeta(meta),
          },
          requestOptions,
        ),
      );
    },

    onChange(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },

    onLog(listener) {
      logListeners.add(listener);
      return () => {
        logListeners.delete(listener);
      };
    },

    async close() {
      listeners.clear();
      logListeners.clear();
      await Promise.all([...connections.values()].map((target) => target.close()));
    },
  };
}
