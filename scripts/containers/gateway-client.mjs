// MCP over Streamable HTTP against a containerised gateway, with the MCP SDK client the workspace has.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const ROOT = new URL("../../", import.meta.url).pathname;
const SDK = join(
  ROOT,
  "apps",
  "gateway",
  "node_modules",
  "@modelcontextprotocol",
  "sdk",
  "dist",
  "esm",
  "client",
);

/** A module of the MCP SDK's client ("index.js", "stdio.js", ...), from the workspace's install. */
export function sdkClientModule(file) {
  return import(pathToFileURL(join(SDK, file)).href);
}

/** An initialized MCP client on http://127.0.0.1:<port>/mcp with the bearer token and a conversation. */
export async function connectGateway(port, token, conversation) {
  const { Client } = await sdkClientModule("index.js");
  const { StreamableHTTPClientTransport } = await sdkClientModule("streamableHttp.js");
  const client = new Client({ name: "container-check", version: "1.0.0" });
  const headers = { authorization: `Bearer ${token}`, "codecell-session": conversation };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers } }),
  );
  return client;
}

/** Calls exec or wait and resolves with the structured result. */
export async function callCodeMode(client, tool, args) {
  const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 });
  return result.structuredContent;
}

/** Polls GET url until it answers `status` (bounded); resolves with the last answer's status and body. */
export async function waitForStatus(url, status, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last = { status: 0, body: "" };
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      last = { status: response.status, body: await response.text() };
      if (last.status === status) return last;
    } catch (error) {
      last = { status: 0, body: String(error) };
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(
    `${url} did not answer ${status} within ${timeoutMs} ms (last: ${last.status} ${last.body})`,
  );
}
