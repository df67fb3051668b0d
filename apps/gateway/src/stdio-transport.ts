import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Gateway } from "./gateway.js";
import { createSessionServer } from "./mcp-front.js";

/**
 * MCP over stdio: one process, one client, one session. Its id is stable (`stdio` unless `--session`
 * says otherwise), so a gateway restarted on a SQLite store can resume the runs the previous process
 * left waiting. Resolves when the client closes the connection.
 */
export async function serveStdio(gateway: Gateway, sessionId: string): Promise<void> {
  const front = createSessionServer(gateway, () => sessionId);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolvePromise) => {
    transport.onclose = () => resolvePromise();
    process.stdin.once("end", () => resolvePromise());
  });
  await front.server.connect(transport);
  await closed;
  await front.server.close().catch(() => {});
}
