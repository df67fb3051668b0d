import { connect, createServer, type Socket } from "node:net";

export type TcpProxy = {
  /** The loopback port clients connect to. */
  port: number;
  /**
   * A network partition: bytes stop flowing both ways on every connection, and new connections are
   * accepted but get nothing, so the client sees timeouts (not a refused or reset connection).
   */
  cut(): void;
  /** Ends the partition: the stalled connections are dropped (as a router reboot would) and new ones flow. */
  heal(): void;
  close(): Promise<void>;
};

/** A loopback TCP proxy to `targetPort` that a test can partition. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let partitioned = false;
  const pairs = new Set<[Socket, Socket | null]>();
  const server = createServer((client) => {
    client.on("error", () => {});
    const pair: [Socket, Socket | null] = [client, null];
    pairs.add(pair);
    client.once("close", () => {
      pairs.delete(pair);
      pair[1]?.destroy();
    });
    // While cut, a new connection is held without an upstream: it hangs like a dropped route.
    if (partitioned) return;
    const upstream = connect(targetPort, "127.0.0.1");
    pair[1] = upstream;
    upstream.on("error", () => client.destroy());
    upstream.once("close", () => client.destroy());
    client.on("data", (chunk) => {
      if (!partitioned) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!partitioned) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no port");
  return {
    port: address.port,
    cut() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
      for (const [client, upstream] of [...pairs]) {
        client.destroy();
        upstream?.destroy();
      }
    },
    async close() {
      for (const [client, upstream] of [...pairs]) {
        client.destroy();
        upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
