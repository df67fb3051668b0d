import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Readiness } from "../../src/http/readiness.js";

/** One request on a connection of its own, as a probe makes it (a draining server closes idle ones). */
function send(url: string, init: { method?: string; headers?: Record<string, string> } = {}) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: init.method ?? "GET", headers: init.headers, agent: false },
      (res) => {
        let text = "";
        res.on("data", (chunk) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("Readiness", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  /** A server whose POSTs answer when `finish` is called; readiness routes first, as in the transport. */
  async function serve(readiness: Readiness) {
    const held: Array<() => void> = [];
    server = createServer((req, res) => {
      if (readiness.route(req, res, new URL(req.url ?? "/", "http://x").pathname)) return;
      if (req.method === "POST") held.push(() => res.end("done"));
      else res.end("ok");
    });
    readiness.watch(server);
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const readyz = async () => {
      const { status, text } = await send(`${base}/readyz`);
      return { status, body: JSON.parse(text) };
    };
    return { base, held, readyz, server };
  }

  it("is starting, then ready, then draining, and says only that", async () => {
    const readiness = new Readiness();
    const { readyz, base, server } = await serve(readiness);
    expect(await readyz()).toEqual({ status: 503, body: { status: "not_ready", reason: "starting" } });
    readiness.ready();
    expect(await readyz()).toEqual({ status: 200, body: { status: "ready" } });
    const report = await readiness.drain(server, 1000, () => 0);
    expect(report).toMatchObject({ requests: 0, calls: 0 });
    expect(await readyz()).toEqual({ status: 503, body: { status: "not_ready", reason: "draining" } });
    // A new MCP session is refused while draining; one that exists is let through.
    expect((await send(`${base}/mcp`, { method: "POST" })).status).toBe(503);
    expect((await send(`${base}/mcp`, { headers: { "mcp-session-id": "s" } })).status).toBe(200);
  });

  it("waits for requests and nested calls in flight, and no longer than its bound", async () => {
    const readiness = new Readiness();
    const { base, held, server } = await serve(readiness);
    readiness.ready();
    const request = send(`${base}/mcp`, { method: "POST", headers: { "mcp-session-id": "s" } });
    // Bounded: the request reaches the server within a second.
    for (let attempt = 0; attempt < 100 && held.length === 0; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    let calls = 1;
    const drained = readiness.drain(server, 5000, () => calls);
    setTimeout(() => held[0]!(), 100);
    setTimeout(() => {
      calls = 0;
    }, 300);
    expect(await drained).toMatchObject({ requests: 0, calls: 0 });
    expect((await request).text).toBe("done");
    // A call that never ends is left behind once the bound is over.
    const cut = await new Readiness().drain(server, 200, () => 2);
    expect(cut).toMatchObject({ requests: 0, calls: 2 });
  });
});
