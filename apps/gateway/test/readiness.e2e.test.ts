// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { existsSync, readFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/redis-server.mjs";
import {
  APP_DIR,
  baseConfig,
  type Connected,
  callCodeMode,
  connectHttp,
  exitedWithOutput,
  type HttpGateway,
  makeSetup,
  startHttpGateway,
  until,
} from "./harness.js";

const SLOW_SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");
const LATE_SERVER = join(APP_DIR, "test", "fixtures", "late-server.mjs");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * GET /readyz on a connection of its own, as a probe does (a draining gateway closes idle pooled
 * connections, which a pooled client could pick just as they close); null when nothing answers.
 */
function readyz(url: string): Promise<{ status: number; body: unknown } | null> {
  return new Promise((resolve) => {
    const req = get(`${url}readyz`, { agent: false }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", () => resolve(null));
  });
}

/** The readiness gauges of `GET /metrics`, read on a connection of its own like `readyz`. */
function readinessGauges(url: string): Promise<Record<string, number> | null> {
  return new Promise((resolve) => {
    const req = get(`${url}metrics`, { agent: false }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        const gauges: Record<string, number> = {};
        for (const family of parsePrometheusTextFormat(text)) {
          for (const metric of family.metrics) {
            if (family.name === "codecell_ready") gauges.codecell_ready = Number(metric.value);
            if (family.name === "codecell_readiness_state")
              gauges[`state ${metric.labels?.state}`] = Number(metric.value);
          }
        }
        resolve(gauges);
      });
    });
    req.on("error", () => resolve(null));
  });
}

/** The gateway's exit code, once its output has been read to the end. */
function exited(gateway: HttpGateway): Promise<number | null> {
  return exitedWithOutput(gateway.child);
}

// What a load balancer or Kubernetes probe sees: /readyz says whether /mcp takes sessions (not while
// starting, not while draining at shutdown); /healthz stays the liveness answer.
describe("readiness and drain over HTTP", () => {
  const gateways: HttpGateway[] = [];
  const clients: Connected[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close().catch(() => {});
    for (const gateway of gateways.splice(0)) await gateway.stop();
  });

  function slowSetup(drainSeconds: number) {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
        plugins: [],
        mcpServers: {
          slow: {
            command: process.execPath,
            args: [SLOW_SERVER],
            env: { CALL_LOG: "${CODECELL_CONFIG_DIR}/calls.log" },
          },
        },
        http: { drainSeconds },
      }),
    );
    const callLog = () => {
      const file = join(setup.dir, "calls.log");
      return existsSync(file) ? readFileSync(file, "utf8") : "";
    };
    return { ...setup, callLog };
  }

  it("is not ready while starting, ready once /mcp takes sessions, and says nothing more", async () => {
    const { configPath } = makeSetup(
      baseConfig({
        plugins: [],
        // A server that answers only after 2.5 s holds the start for mcpStartupWaitMs.
        mcpServers: { late: { command: process.execPath, args: [LATE_SERVER], env: { DELAY_MS: "2500" } } },
        mcpStartupWaitMs: 2000,
      }),
    );
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/`;
    const starting = startHttpGateway(configPath, { args: ["--http", String(port)] });
    let early: Awaited<ReturnType<typeof readyz>> = null;
    // Bounded: the start takes about two seconds.
    for (let attempt = 0; attempt < 200 && early === null; attempt += 1) {
      early = await readyz(url);
      if (early === null) await sleep(20);
    }
    const gateway = await starting;
    gateways.push(gateway);
    expect(early).toEqual({ status: 503, body: { status: "not_ready", reason: "starting" } });
    expect(await readyz(url)).toEqual({ status: 200, body: { status: "ready" } });
    // Ready means it: a session starts and runs a cell.
    const session = await connectHttp(gateway.mcpUrl);
    clients.push(session);
    expect(await callCodeMode(session.client, "exec", { code: "return 2" })).toMatchObject({ value: 2 });
    // Liveness stays where it was.
    expect((await fetch(`${url}healthz`)).status).toBe(200);
    expect((await fetch(`${url}readyz`, { method: "POST" })).status).toBe(405);
  });

  it("drains at SIGTERM: not ready, new sessions refused, the exec in flight finishes, then it exits", async () => {
    const setup = slowSetup(15);
    const gateway = await startHttpGateway(setup.configPath);
    gateways.push(gateway);
    const session = await connectHttp(gateway.mcpUrl);
    clients.push(session);
    const running = callCodeMode(session.client, "exec", {
      code: `return (await MCP.slow.waitLong({ seconds: 2 })).content[0].text;`,
    });
    // Bounded: the call starts within a second or two.
    for (let attempt = 0; attempt < 100 && !setup.callLog().includes("started"); attempt += 1)
      await sleep(50);
    expect(await readinessGauges(gateway.url)).toEqual({
      codecell_ready: 1,
      "state starting": 0,
      "state ready": 1,
      "state draining": 0,
    });
    const exit = exited(gateway);
    gateway.child.kill("SIGTERM");
    await until(
      async () => (await readyz(gateway.url))?.status === 503,
      "/readyz to answer 503 while draining",
    );
    expect(await readyz(gateway.url)).toEqual({
      status: 503,
      body: { status: "not_ready", reason: "draining" },
    });
    // A scrape while draining sees it too.
    expect(await readinessGauges(gateway.url)).toEqual({
      codecell_ready: 0,
      "state starting": 0,
      "state ready": 0,
      "state draining": 1,
    });
    await expect(connectHttp(gateway.mcpUrl)).rejects.toThrow(/503|shutting down/);
    expect(await running).toMatchObject({ status: "completed", value: "finished" });
    expect(await exit).toBe(0);
    expect(gateway.output()).not.toContain("still running");
  });

  it("stops waiting at http.drainSeconds and says what it cut off", async () => {
    const setup = slowSetup(1);
    const gateway = await startHttpGateway(setup.configPath);
    gateways.push(gateway);
    const session = await connectHttp(gateway.mcpUrl);
    clients.push(session);
    void callCodeMode(session.client, "exec", {
      code: `return (await MCP.slow.waitLong({ seconds: 30 })).content[0].text;`,
    }).catch(() => null);
    for (let attempt = 0; attempt < 100 && !setup.callLog().includes("started"); attempt += 1)
      await sleep(50);
    const exit = exited(gateway);
    gateway.child.kill("SIGTERM");
    expect(await exit).toBe(0);
    expect(gateway.output()).toContain("after 1000 ms (http.drainSeconds), 1 request(s)");
  });
});
