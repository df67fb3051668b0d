import type { CodeModeLanguage, CodeModeResult, TrajectoryExport } from "@codecell/contract";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export const TRAJECTORY_URI = "codecell://session/trajectory";

/** Asked when the gateway wants the user to approve a nested call (MCP form elicitation). */
export type ApprovalPrompt = (message: string) => Promise<boolean>;

export type SessionOptions = {
  /** Shown to the gateway as the client's name. */
  clientName: string;
  /** Given: the session declares elicitation support and asks here; absent: such calls are refused. */
  approve?: ApprovalPrompt;
  /** How long one exec or wait may take on the wire before the client gives up. */
  requestTimeoutMs?: number;
};

/** The MCP error a call failed with, or the gateway's result when the call itself failed. */
export class GatewayCallError extends Error {
  override readonly name = "GatewayCallError";
}

/**
 * Reads a code-mode result out of an MCP tool result: the gateway sends it as `structuredContent` (its
 * text item is only the model's compact view, without telemetry); an older gateway sent the same JSON
 * as the first text item. Anything else means the call never reached code mode.
 */
export function codeModeResultOf(result: CallToolResult): CodeModeResult {
  const structured = result.structuredContent as { status?: unknown } | undefined;
  if (structured && typeof structured.status === "string") return structured as CodeModeResult;
  const first = result.content?.[0];
  const text = first && first.type === "text" ? first.text : "";
  try {
    const parsed = JSON.parse(text) as { status?: unknown };
    if (parsed && typeof parsed.status === "string") return parsed as CodeModeResult;
  } catch {
    // not JSON: reported below with the text the gateway sent
  }
  throw new GatewayCallError(
    `The gateway answered without a code-mode result${text ? ` (${text})` : ""}. Is code mode enabled in its config?`,
  );
}

function isExpiredSession(error: unknown): boolean {
  return error instanceof StreamableHTTPError && error.code === 404;
}

/**
 * One MCP session with the gateway over Streamable HTTP, on the page's own origin. It calls only what
 * any MCP client sees, `exec` and `wait`, plus the session's trajectory resource.
 */
export class GatewaySession {
  readonly #endpoint: URL;
  readonly #options: SessionOptions;
  #client: Client | null = null;
  #connecting: Promise<Client> | null = null;
  serverName = "";
  serverVersion = "";

  constructor(endpoint: URL, options: SessionOptions) {
    this.#endpoint = endpoint;
    this.#options = options;
  }

  get sessionId(): string | undefined {
    const transport = this.#client?.transport as StreamableHTTPClientTransport | undefined;
    return transport?.sessionId;
  }

  connect(): Promise<Client> {
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.#open().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  async #open(): Promise<Client> {
    const approve = this.#options.approve;
    const client = new Client(
      { name: this.#options.clientName, version: "1.0.0" },
      { capabilities: approve ? { elicitation: { form: {} } } : {} },
    );
    if (approve) {
      client.setRequestHandler(ElicitRequestSchema, async (request) => {
        const approved = await approve(String(request.params.message));
        return approved ? { action: "accept", content: { approve: true } } : { action: "decline" };
      });
    }
    await client.connect(new StreamableHTTPClientTransport(this.#endpoint));
    const server = client.getServerVersion();
    this.serverName = server?.name ?? "";
    this.serverVersion = server?.version ?? "";
    this.#client = client;
    return client;
  }

  /** Runs a cell. A result with status `failed` is data, not an exception. */
  exec(code: string, language: CodeModeLanguage): Promise<CodeModeResult> {
    return this.#callCodeMode("exec", { code, language });
  }

  /** Continues a waiting run. */
  wait(runId: string): Promise<CodeModeResult> {
    return this.#callCodeMode("wait", { runId });
  }

  /** The session's exec and wait calls with the nested calls made under them. */
  async trajectory(): Promise<TrajectoryExport> {
    const client = await this.connect();
    const read = await client.readResource({ uri: TRAJECTORY_URI });
    const first = read.contents[0];
    if (!first || !("text" in first)) {
      throw new GatewayCallError(`The gateway sent no text for ${TRAJECTORY_URI}.`);
    }
    return JSON.parse(first.text) as TrajectoryExport;
  }

  async #callCodeMode(name: "exec" | "wait", input: Record<string, unknown>): Promise<CodeModeResult> {
    const call = async () => {
      const client = await this.connect();
      const timeout = this.#options.requestTimeoutMs ?? 120_000;
      return (await client.callTool({ name, arguments: input }, undefined, {
        timeout,
      })) as CallToolResult;
    };
    try {
      return codeModeResultOf(await call());
    } catch (error) {
      // A restarted gateway forgets sessions: open a new one and send the call again (the 404 means
      // the gateway did not run it). Waiting runs of the old session are gone with it.
      if (!isExpiredSession(error)) throw error;
      await this.close();
      return codeModeResultOf(await call());
    }
  }

  /** Ends the MCP session on the gateway (its waiting runs are deleted). */
  async close(): Promise<void> {
    const client = this.#client;
    this.#client = null;
    if (!client) return;
    const transport = client.transport as StreamableHTTPClientTransport | undefined;
    // Leaving is best effort: a gateway that is already gone has no session left to end.
    await transport?.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}
