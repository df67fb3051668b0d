import { CodeModeError } from "@codecell/contract";
import type { McpToolDefinition } from "@codecell/mcp-declarations";
import type { Transport as ModernTransport } from "@modelcontextprotocol/client";
import type { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  LoggingMessageNotificationSchema,
  McpError,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { isStdioConfig, type McpServerConfig } from "./config.js";
import type { McpLogMessage } from "./connector.js";
import { guardedFetch } from "./guarded-fetch.js";
import { guardStdioTransport } from "./guarded-read-buffer.js";
import { type DownstreamClient, openModernClient, refusedLegacyOpening } from "./modern-client.js";
import { trackSpawnedProcess } from "./spawned-processes.js";
import { stderrReason } from "./stderr-reason.js";
import { type McpRequestTarget, withTraceHeaders } from "./tracing.js";

export type ConnectionSettings = {
  clientName: string;
  clientVersion: string;
  connectTimeoutMs: number;
  stderrTailChars: number;
  reconnectInitialDelayMs: number;
  reconnectMaxDelayMs: number;
};

export type ConnectionState = "idle" | "connecting" | "ready" | "disconnected" | "failed" | "closed";

// Pagination is followed, but a server that hands out cursors forever must not hang the host.
const MAX_PAGES = 100;
/** How long a failed start waits for a dying stdio server's stderr to end, to report its last words. */
const STDERR_END_WAIT_MS = 3_000;

/**
 * One downstream server: its client and transport, what it listed, the tail of its stderr, and the
 * reconnect backoff. A failure here is recorded on this connection and never touches another one.
 */
export class ServerConnection {
  state: ConnectionState = "idle";
  client: DownstreamClient | undefined;
  /**
   * Which protocol the server speaks: `legacy` (2025-11-25 and older, SDK 1.x's client, with a
   * session) or `modern` (2026-07-28 only, SDK v2's client, stateless, downstream tasks).
   */
  era: "legacy" | "modern" | undefined;
  tools: McpToolDefinition[] = [];
  serverTitle: string | undefined;
  instructions: string | undefined;
  offersResources = false;
  offersPrompts = false;
  transportKind: "stdio" | "streamable-http" | "sse" | undefined;
  lastError: string | undefined;
  private stderrTail = "";
  /** Resolves when the stdio server's stderr has ended (the process is gone and said all it will). */
  private stderrEnded: Promise<void> = Promise.resolve();
  /** Hears the server's log messages (`notifications/message`). */
  onLog: ((message: McpLogMessage) => void) | undefined;
  private transport: Transport | undefined;
  private connecting: Promise<void> | undefined;
  private failures = 0;
  private retryAt = 0;

  constructor(
    readonly id: string,
    readonly config: McpServerConfig,
    private readonly settings: ConnectionSettings,
    private readonly onToolsChanged: (connection: ServerConnection) => void,
    private readonly onDisconnect: (connection: ServerConnection, reason: string) => void,
  ) {}

  /** Who a request goes to, for its span (see tracing.ts). */
  traceTarget(): McpRequestTarget {
    const transport = this.transport as { sessionId?: string; protocolVersion?: string } | undefined;
    return {
      server: this.id,
      transport: this.transportKind,
      ...("url" in this.config && typeof this.config.url === "string" ? { url: this.config.url } : {}),
      ...(transport?.sessionId ? { sessionId: transport.sessionId } : {}),
      ...(transport?.protocolVersion ? { protocolVersion: transport.protocolVersion } : {}),
    };
  }

  get pid(): number | undefined {
    if (this.transportKind !== "stdio") return undefined;
    return (this.transport as StdioClientTransport | undefined)?.pid ?? undefined;
  }

  /** The last lines the server wrote to stderr, for failure messages. */
  get stderr(): string {
    return this.stderrTail.trim();
  }

  /** Connects (once at a time); resolves when ready, rejects with the reason. */
  connect(): Promise<void> {
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /**
   * Ready for a call: connects again after a disconnect or a failed start, but not sooner than the
   * backoff allows; until then calls fail fast with the last reason.
   */
  async ensureReady(): Promise<DownstreamClient> {
    if (this.state === "ready" && this.client) return this.client;
    if (this.state === "closed") throw this.unavailable("the connector is closed");
    if (this.connecting) {
      await this.connecting.catch(() => undefined);
    } else {
      const wait = this.retryAt - Date.now();
      if (wait > 0)
        throw this.unavailable(`${this.lastError ?? "not connected"}; next reconnect in ${wait} ms`);
      await this.connect().catch(() => undefined);
    }
    if (this.state === "ready" && this.client) return this.client;
    throw this.unavailable(this.lastError ?? "not connected");
  }

  /** Read through a getter so narrowing of `state` in an async method cannot hide a concurrent close. */
  private get isClosed(): boolean {
    return this.state === "closed";
  }

  /** The deadline for `initialize` and the first tool listing: the server's own, else the connector's. */
  get connectTimeoutMs(): number {
    return this.config.connectTimeoutMs ?? this.settings.connectTimeoutMs;
  }

  /**
   * Closes the connection and stops the process, also while it is still connecting: a server that
   * never answered `initialize` is killed here too, not left running.
   */
  async close(): Promise<void> {
    this.state = "closed";
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    await Promise.all([client?.close().catch(() => undefined), transport?.close().catch(() => undefined)]);
  }

  /**
   * A `nested_tool_failed` error about this server: one line, with the line of its stderr that says why
   * when it wrote one, and the whole stderr tail in `details.stderr`.
   */
  failure(reason: string, details: Record<string, string> = {}): CodeModeError {
    const tail = this.stderr;
    const message = tail ? `${reason} (stderr: ${stderrReason(tail)})` : reason;
    return new CodeModeError("nested_tool_failed", message, {
      server: this.id,
      ...details,
      ...(tail ? { stderr: tail } : {}),
    });
  }

  private unavailable(reason: string): CodeModeError {
    return this.failure(`MCP server "${this.id}" is unavailable: ${reason}`);
  }

  /**
   * Opens the client and lists its tools within the server's deadline. Past it the transport is
   * closed (which stops a stdio server's process) and the start fails naming the deadline.
   */
  private async openWithinDeadline(): Promise<DownstreamClient> {
    const deadline = this.connectTimeoutMs;
    const opening = this.openClient().then(async (client) => {
      if (this.state === "closed") {
        await client.close().catch(() => undefined);
        throw new Error("the connector was closed while the server was starting");
      }
      this.client = client;
      return client;
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `no answer to initialize within ${deadline} ms (connectTimeoutMs); the server is stopped`,
            ),
          ),
        deadline,
      );
    });
    opening.catch(() => undefined);
    try {
      return await Promise.race([opening, timedOut]);
    } catch (error) {
      // Whatever was spawned goes, even if the SDK is still waiting for the server's answer.
      const transport = this.transport;
      this.transport = undefined;
      void transport?.close().catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private async open(): Promise<void> {
    this.state = "connecting";
    this.stderrTail = "";
    const started = Date.now();
    try {
      const client = await this.openWithinDeadline();
      const capabilities = client.getServerCapabilities() ?? {};
      const info = client.getServerVersion();
      this.serverTitle = info?.title ?? info?.name;
      this.instructions = client.getInstructions();
      this.offersResources = capabilities.resources !== undefined;
      this.offersPrompts = capabilities.prompts !== undefined;
      // A 2026-07-28 server sends no log messages, and its list_changed needs subscriptions/listen.
      if (client instanceof Client) {
        client.setNotificationHandler(LoggingMessageNotificationSchema, async ({ params }) => {
          this.onLog?.({
            server: this.id,
            level: params.level,
            ...(params.logger !== undefined ? { logger: params.logger } : {}),
            data: params.data,
          });
        });
        client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
          await this.refreshTools().catch((error: unknown) => {
            this.lastError = `tools/list after list_changed failed: ${describeError(error)}`;
          });
        });
      }
      this.tools = await this.listTools(client, Math.max(1, this.connectTimeoutMs - (Date.now() - started)));
      if (this.isClosed) throw new Error("the connector was closed while the server was starting");
      this.state = "ready";
      this.failures = 0;
      this.lastError = undefined;
    } catch (error) {
      // A process that dies on start writes its last words just before exiting: let them arrive, up to
      // the end of its stderr (bounded, for a process that is still being stopped).
      if (this.transportKind === "stdio") {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.stderrEnded,
          new Promise((resolve) => {
            timer = setTimeout(resolve, STDERR_END_WAIT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      const reason = describeError(error);
      this.lastError = this.stderr ? `${reason} (stderr: ${stderrReason(this.stderr)})` : reason;
      const client = this.client;
      this.client = undefined;
      if (!this.isClosed) {
        this.state = "failed";
        this.scheduleRetry();
      }
      await client?.close().catch(() => undefined);
      throw this.failure(`MCP server "${this.id}" failed to start: ${reason}`);
    }
  }

  // Each client transport is imported when a server first needs it: a gateway with no (or only local)
  // downstream servers does not load the HTTP and SSE clients on its way to the first tools/list.
  //
  // Each server is first opened with SDK 1.x's client (the 2025 handshake every server of that era
  // answers, and no extra process); a server that refuses it as an unsupported protocol version speaks
  // only 2026-07-28 and is opened again with SDK v2's client (see modern-client.ts).
  private async openClient(): Promise<DownstreamClient> {
    const config = this.config;
    if (isStdioConfig(config)) {
      const { getDefaultEnvironment, StdioClientTransport } = await import(
        "@modelcontextprotocol/sdk/client/stdio.js"
      );
      const parameters = {
        command: config.command,
        args: config.args ?? [],
        env: { ...getDefaultEnvironment(), ...(config.env ?? {}) },
        ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
        stderr: "pipe" as const,
      };
      this.transportKind = "stdio";
      try {
        return await this.attach(this.watchStdio(new StdioClientTransport(parameters)));
      } catch (error) {
        if (!refusedLegacyOpening(error)) throw error;
      }
      const modern = await import("@modelcontextprotocol/client/stdio");
      return this.attachModern(this.watchStdio(new modern.StdioClientTransport(parameters)));
    }
    const url = new URL(config.url);
    const requestInit = config.headers ? { headers: config.headers } : undefined;
    // Answers too large or too deep fail their call at once, as over stdio (see guarded-fetch.ts).
    // Each request carries the active trace context (`traceparent`) when the host traces.
    const guarded = guardedFetch();
    const fetch: typeof guarded = (input, init) => guarded(input, withTraceHeaders(init));
    if (config.transport !== "sse") {
      try {
        this.transportKind = "streamable-http";
        const { StreamableHTTPClientTransport } = await import(
          "@modelcontextprotocol/sdk/client/streamableHttp.js"
        );
        return await this.attach(
          new StreamableHTTPClientTransport(url, { fetch, ...(requestInit ? { requestInit } : {}) }),
        );
      } catch (error) {
        if (refusedLegacyOpening(error)) {
          const modern = await import("@modelcontextprotocol/client");
          return this.attachModern(
            new modern.StreamableHTTPClientTransport(url, { fetch, ...(requestInit ? { requestInit } : {}) }),
          );
        }
        if (config.transport === "streamable-http") throw error;
        // Servers from before Streamable HTTP answer the POST with 4xx; they speak SSE instead.
      }
    }
    this.transportKind = "sse";
    const { SSEClientTransport } = await import("@modelcontextprotocol/sdk/client/sse.js");
    return this.attach(new SSEClientTransport(url, { fetch, ...(requestInit ? { requestInit } : {}) }));
  }

  /**
   * A stdio transport (of either SDK, which share its internals) made safe before it starts: bounded
   * reads, its process tracked until it exits, the tail of its stderr kept.
   */
  private watchStdio<T extends StdioClientTransport | ModernStdioTransport>(transport: T): T {
    guardStdioTransport(transport as StdioClientTransport);
    trackSpawnedProcess(transport as StdioClientTransport);
    const stderr = transport.stderr;
    this.stderrEnded = stderr
      ? new Promise((resolve) => {
          stderr.once("end", resolve);
          stderr.once("close", resolve);
        })
      : Promise.resolve();
    stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-this.settings.stderrTailChars);
    });
    return transport;
  }

  private async attachModern(transport: ModernTransport): Promise<DownstreamClient> {
    this.transport = transport as unknown as Transport;
    const opened = await openModernClient(
      transport,
      { name: this.settings.clientName, version: this.settings.clientVersion },
      this.connectTimeoutMs + 1000,
    );
    this.transport = opened.transport as unknown as Transport;
    const client = opened.client;
    this.era = "modern";
    this.watchClose(client);
    return client;
  }

  private watchClose(client: DownstreamClient): void {
    client.onclose = () => {
      if (this.client !== client || this.state === "closed") return;
      this.state = "disconnected";
      this.client = undefined;
      this.lastError = "the server closed the connection";
      this.scheduleRetry();
      this.onDisconnect(this, this.lastError);
    };
  }

  private async attach(transport: Transport): Promise<Client> {
    const client = new Client({ name: this.settings.clientName, version: this.settings.clientVersion });
    this.watchClose(client);
    this.transport = transport;
    this.era = "legacy";
    try {
      // The deadline in openWithinDeadline decides; the SDK's own timeout is only a backstop behind it.
      await client.connect(transport, { timeout: this.connectTimeoutMs + 1000 });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    return client;
  }

  private scheduleRetry(): void {
    this.failures++;
    const delay = Math.min(
      this.settings.reconnectMaxDelayMs,
      this.settings.reconnectInitialDelayMs * 2 ** Math.min(this.failures - 1, 16),
    );
    this.retryAt = Date.now() + delay;
  }

  private async refreshTools(): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.tools = await this.listTools(client);
    this.onToolsChanged(this);
  }

  private async listTools(client: DownstreamClient, timeout?: number): Promise<McpToolDefinition[]> {
    if (client.getServerCapabilities()?.tools === undefined) return [];
    const tools: McpToolDefinition[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const result = await client.listTools(
        cursor === undefined ? {} : { cursor },
        timeout !== undefined ? { timeout } : undefined,
      );
      tools.push(...(result.tools as McpToolDefinition[]));
      cursor = result.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  }
}

/** A short, human reason from whatever a transport or the SDK threw. */
export function describeError(error: unknown): string {
  if (error instanceof McpError) {
    if (error.code === ErrorCode.ConnectionClosed) return "the server closed the connection";
    return error.message.replace(/^MCP error -?\d+: /, "");
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ENOENT") return `command not found (${error.message})`;
    return error.message;
  }
  return String(error);
}
