import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { CLI } from "../harness.js";

/** A client of MCP 2026-07-28 (SDK v2, negotiating), connected to a gateway. */
export type ModernConnected = { client: Client; close(): Promise<void> };

function modernClient(onElicit?: (message: string) => boolean): Client {
  const client = new Client(
    { name: "codecell-test-2026", version: "1.0.0" },
    {
      versionNegotiation: { mode: "auto" },
      capabilities: onElicit ? { elicitation: { form: {} } } : {},
    },
  );
  if (onElicit) {
    client.setRequestHandler("elicitation/create", (request) => {
      const approve = onElicit(String((request.params as { message?: unknown }).message));
      return { action: "accept", content: { approve } };
    });
  }
  return client;
}

/** Connects over Streamable HTTP with `headers` on every request (a bearer token, a scope). */
export async function connectModernHttp(
  mcpUrl: string,
  headers: Record<string, string> = {},
  onElicit?: (message: string) => boolean,
): Promise<ModernConnected> {
  const client = modernClient(onElicit);
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers } }));
  return { client, close: () => client.close() };
}

/** Starts `codecell serve` over stdio and connects to it. */
export async function connectModernStdio(
  configPath: string,
  onElicit?: (message: string) => boolean,
): Promise<ModernConnected> {
  const client = modernClient(onElicit);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "serve", "--config", configPath],
    stderr: "ignore",
  });
  await client.connect(transport);
  return { client, close: () => client.close() };
}
