import { existsSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  APP_DIR,
  baseConfig,
  connectHttp,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
} from "./harness.js";

// The promise tested here: "Stream resumability (Last-Event-ID, through the SDK's event store interface) so a
// client that reconnects misses no result."

/** A TCP relay in front of the gateway that can cut every connection at once, like a dropped network. */
async function startRelay(
  target: URL,
): Promise<{ url: string; cut(): void; sent(): string; close(): Promise<void> }> {
  const pairs = new Set<[Socket, Socket]>();
  let sent = "";
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.on("data", (chunk: Buffer) => {
      sent += chunk.toString("latin1");
    });
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    cut() {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    sent: () => sent,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("a client whose SSE stream drops mid-exec", () => {
  let gateway: HttpGateway;
  let workspace: string;

  beforeAll(async () => {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
        mcpServers: {
          slow: {
            command: process.execPath,
            args: [join(APP_DIR, "test", "fixtures", "slow-server.mjs")],
            // biome-ignore lint/suspicious/noTemplateCurlyInString: a config ${ENV} reference
            env: { CALL_LOG: "${CODECELL_CONFIG_DIR}/calls.log" },
          },
        },
      }),
    );
    workspace = setup.workspace;
    gateway = await startHttpGateway(setup.configPath);
  });
  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
  });

  it("reconnects with Last-Event-ID and receives the result it missed; the run was not cancelled", async () => {
    const relay = await startRelay(new URL(gateway.mcpUrl));
    const session = await connectHttp(relay.url);
    try {
      let progressed = 0;
      const call = session.client.callTool(
        {
          name: "exec",
          arguments: {
            code: `await MCP.slow.waitLong({ seconds: 4 }); await tools.write_file({ path: "resumed.txt", content: "1" }); return "finished after the drop";`,
          },
        },
        undefined,
        { onprogress: () => void progressed++, timeout: 60_000 },
      );
      const deadline = Date.now() + 20_000;
      while (progressed === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(progressed).toBeGreaterThan(0);
      const before = relay.sent().length;
      relay.cut(); // the POST's SSE stream is gone, with the cell still running

      const result = await call;
      expect(result.structuredContent).toMatchObject({
        status: "completed",
        value: "finished after the drop",
      });
      // It came back on a GET that named the last event it had seen.
      expect(relay.sent().slice(before)).toMatch(
        /^GET \/mcp HTTP\/1\.1\r\n[\s\S]*?last-event-id: \S+_\d+\r\n/im,
      );
      expect(existsSync(join(workspace, "resumed.txt"))).toBe(true);
    } finally {
      await session.close();
      relay.cut();
      await relay.close();
    }
  });
});
