import type { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { TASKS_EXTENSION, withDownstreamTasks } from "./downstream-tasks.js";

/** What the connector asks of a client, whichever SDK and protocol era is behind it. */
export type DownstreamClient = Pick<
  LegacyClient,
  | "callTool"
  | "listTools"
  | "listResources"
  | "listResourceTemplates"
  | "readResource"
  | "listPrompts"
  | "getPrompt"
  | "getServerCapabilities"
  | "getServerVersion"
  | "getInstructions"
  | "close"
> & { onclose?: (() => void) | undefined };

const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/**
 * True when a server refused the 2025-era `initialize` because it speaks only the 2026-07-28 protocol
 * (its answer is the unsupported-protocol-version error; over HTTP it comes inside a 400).
 */
export function refusedLegacyOpening(error: unknown): boolean {
  if (error instanceof McpError) return error.code === UNSUPPORTED_PROTOCOL_VERSION;
  return error instanceof Error && error.message.includes(`"code":${UNSUPPORTED_PROTOCOL_VERSION}`);
}

/** SDK v2's errors as the SDK 1.x ones the connector already maps to its own failures. */
function asLegacyError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  if (code === "REQUEST_TIMEOUT") return new McpError(ErrorCode.RequestTimeout, error.message);
  if (code === "CONNECTION_CLOSED") return new McpError(ErrorCode.ConnectionClosed, error.message);
  if (typeof code === "number") {
    return new McpError(
      code,
      error.message.replace(/^MCP error -?\d+: /, ""),
      (error as { data?: unknown }).data,
    );
  }
  return error;
}

/** SDK v2's client, connected, with a transport it will own. */
type ModernSdkClient = import("@modelcontextprotocol/client").Client;
type ModernTransport = import("@modelcontextprotocol/client").Transport;

/**
 * Connects SDK v2's client with version negotiation `auto` (a `server/discover` probe, the 2026-07-28
 * protocol when the server offers it) and the tasks extension declared, then presents it with the
 * methods the connector calls on SDK 1.x's client, errors included.
 */
export async function openModernClient(
  transport: ModernTransport,
  identity: { name: string; version: string },
  timeout: number,
): Promise<{ client: DownstreamClient; transport: ModernTransport }> {
  const { Client } = await import("@modelcontextprotocol/client");
  const tasks = withDownstreamTasks(transport);
  const wrapped = tasks.transport;
  const client: ModernSdkClient = new Client(identity, {
    versionNegotiation: { mode: "auto", probe: { timeoutMs: timeout } },
    capabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
  try {
    await client.connect(wrapped, { timeout });
  } catch (error) {
    await client.close().catch(() => undefined);
    throw asLegacyError(error);
  }
  const call =
    <A extends unknown[], R>(run: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await run(...args);
      } catch (error) {
        throw asLegacyError(error);
      }
    };
  const adapter = {
    callTool: call(
      async (params: Parameters<DownstreamClient["callTool"]>[0], _schema: unknown, options?: object) => {
        // However the call ends short of its result (abort, timeout, a closed connection), a task it
        // started on the server is cancelled; after a result there is nothing left to cancel.
        const ended = new AbortController();
        const args = params.arguments ?? {};
        tasks.endWith(args, ended.signal);
        try {
          return await client.callTool({ ...params, arguments: args } as never, options as never);
        } finally {
          ended.abort();
        }
      },
    ),
    listTools: call((params?: object, options?: object) =>
      client.listTools(params as never, options as never),
    ),
    listResources: call((params?: object, options?: object) =>
      client.listResources(params as never, options as never),
    ),
    listResourceTemplates: call((params?: object, options?: object) =>
      client.listResourceTemplates(params as never, options as never),
    ),
    readResource: call((params: object, options?: object) =>
      client.readResource(params as never, options as never),
    ),
    listPrompts: call((params?: object, options?: object) =>
      client.listPrompts(params as never, options as never),
    ),
    getPrompt: call((params: object, options?: object) =>
      client.getPrompt(params as never, options as never),
    ),
    getServerCapabilities: () => client.getServerCapabilities(),
    getServerVersion: () => client.getServerVersion(),
    getInstructions: () => client.getInstructions(),
    close: () => client.close(),
    set onclose(handler: (() => void) | undefined) {
      client.onclose = handler;
    },
    get onclose() {
      return client.onclose;
    },
  };
  return { client: adapter as unknown as DownstreamClient, transport: wrapped };
}
