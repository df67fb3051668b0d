// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { type Connected, callCodeMode, connectHttp, type HttpGateway, startHttpGateway } from "../harness.js";

/**
 * The `snapshotStore` section of replicas sharing one Redis. The URL and the integrity secret come
 * from each replica's environment (`REDIS_URL`, `CODECELL_SNAPSHOT_SECRET`), so one config file
 * serves replicas pointed at different addresses.
 */
export function redisSnapshotStore(
  keyPrefix: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    kind: "redis",
    url: "${REDIS_URL}",
    secret: "${CODECELL_SNAPSHOT_SECRET}",
    keyPrefix,
    ...extra,
  };
}

/**
 * The replica processes (`codecell serve --http`) of one test file and the MCP clients connected to
 * them, all as one principal in one conversation (`headers`), so any replica may serve any wait.
 */
export class ReplicaFleet {
  readonly gateways: HttpGateway[] = [];
  readonly #clients: Connected[] = [];

  constructor(readonly headers: Record<string, string>) {}

  /**
   * Starts a replica and (unless `warm` is false) runs a first cell on it: a cold VM is slow on a busy
   * machine, and a test should not measure that. `detached` puts the replica in its own process
   * group, to kill it with its downstream servers.
   */
  async start(
    configPath: string,
    options: { env: Record<string, string>; detached?: boolean; warm?: boolean },
  ): Promise<HttpGateway> {
    const gateway = await startHttpGateway(configPath, {
      env: options.env,
      detached: options.detached ?? false,
    });
    this.gateways.push(gateway);
    if (options.warm === false) return gateway;
    const warm = await connectHttp(gateway.mcpUrl, {}, { headers: this.headers });
    try {
      // Bounded: a cold start that misses the deadline leaves a warm worker for the next try.
      for (let attempt = 0; attempt < 4; attempt += 1) {
        if ((await callCodeMode(warm.client, "exec", { code: "return 1" })).status === "completed") break;
      }
    } finally {
      await warm.close();
    }
    return gateway;
  }

  /** An MCP client on `gateway`, closed by `closeClients`. */
  async client(gateway: HttpGateway): Promise<Connected> {
    const connected = await connectHttp(gateway.mcpUrl, {}, { headers: this.headers });
    this.#clients.push(connected);
    return connected;
  }

  async closeClients(): Promise<void> {
    for (const client of this.#clients.splice(0)) await client.close().catch(() => {});
  }

  /** Stops every replica still running; a replica frozen with SIGSTOP is woken first so it can stop. */
  async stopAll(): Promise<void> {
    await this.closeClients();
    for (const gateway of this.gateways.splice(0)) {
      if (gateway.child.exitCode === null) gateway.child.kill("SIGCONT");
      await gateway.stop();
    }
  }
}
