import { randomUUID } from "node:crypto";
import type { Server as HttpServer, IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { Gateway } from "./gateway.js";
import { listenHttp } from "./http-listen.js";
import { createSessionServer } from "./mcp-front.js";
import { serveStatic } from "./static-site.js";
import { GATEWAY_VERSION } from "./version.js";

const MAX_BODY_BYTES = 4 * 1024 * 1024;
const MAX_SESSIONS = 256;
/** A session with no request for this long is closed (its waiting runs go with it). */
const IDLE_SESSION_MS = 30 * 60 * 1000;
const SWEEP_INTERVAL_MS = 60 * 1000;
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

export type HttpServeOptions = {
  port: number;
  host: string;
  playgroundDir?: string;
  /** A server already bound with `listenHttp` (so the port was checked before the gateway started). */
  bound?: { server: HttpServer; ready(): void };
};
export type RunningHttpServer = { url: string; mcpUrl: string; port: number; close(): Promise<void> };

type Entry = { transport: StreamableHTTPServerTransport; lastSeen: number };

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

function rpcError(res: ServerResponse, status: number, message: string): void {
  json(res, status, { jsonrpc: "2.0", error: { code: -32000, message }, id: null });
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * A page on another site must not drive a local gateway through the browser: requests that carry an
 * Origin are accepted only from loopback origins or the host the gateway is bound to.
 */
function originAllowed(req: IncomingMessage, host: string): boolean {
  const origin = req.headers.origin;
  if (!origin) return true;
  try {
    const hostname = new URL(origin).hostname;
    return LOOPBACK.has(hostname) || hostname === host;
  } catch {
    return false;
  }
}

/** MCP over Streamable HTTP at /mcp, health at /healthz, the playground at /. */
export async function serveHttp(gateway: Gateway, options: HttpServeOptions): Promise<RunningHttpServer> {
  const sessions = new Map<string, Entry>();
  let base = "";

  async function handleMcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let body: unknown;
    if (req.method === "POST") {
      try {
        body = await readBody(req);
      } catch (error) {
        rpcError(res, 400, `Parse error: ${(error as Error).message}`);
        return;
      }
    }
    if (sessionId) {
      const entry = sessions.get(sessionId);
      if (!entry) {
        rpcError(res, 404, "Unknown or expired MCP session; start a new one with an initialize request.");
        return;
      }
      entry.lastSeen = Date.now();
      await entry.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      rpcError(
        res,
        400,
        "No MCP session: send an initialize request first (without an Mcp-Session-Id header).",
      );
      return;
    }
    if (sessions.size >= MAX_SESSIONS) await evictIdle(SWEEP_INTERVAL_MS);
    if (sessions.size >= MAX_SESSIONS) {
      rpcError(res, 503, `Too many MCP sessions (${MAX_SESSIONS}); close some and retry.`);
      return;
    }
    let id = "";
    const front = createSessionServer(gateway, () => id);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (newId) => {
        id = newId;
        sessions.set(newId, { transport, lastSeen: Date.now() });
      },
    });
    transport.onclose = () => {
      if (!id || !sessions.has(id)) return;
      sessions.delete(id);
      void front.session().end();
    };
    await front.server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** Closes sessions idle for longer than `idleMs` (clients that vanished without a DELETE). */
  async function evictIdle(idleMs: number): Promise<void> {
    const now = Date.now();
    for (const entry of [...sessions.values()]) {
      // A GET stream or a long exec keeps the session busy; only silent sessions go.
      if (now - entry.lastSeen > idleMs) await entry.transport.close().catch(() => {});
    }
  }
  const sweeper = setInterval(() => void evictIdle(IDLE_SESSION_MS), SWEEP_INTERVAL_MS);
  sweeper.unref();

  const bound = options.bound ?? (await listenHttp(options.port, options.host));
  const server: HttpServer = bound.server;
  server.on("request", (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const route = async () => {
      if (!originAllowed(req, options.host)) {
        json(res, 403, { error: `Origin ${req.headers.origin} is not allowed to use this gateway.` });
        return;
      }
      if (url.pathname === "/mcp") return handleMcp(req, res);
      if (url.pathname === "/healthz") {
        json(res, 200, {
          status: "ok",
          version: GATEWAY_VERSION,
          codeMode: gateway.config.codeMode.enabled,
          sessions: sessions.size,
          mcpServers: gateway.connector
            .status()
            .map(({ server, state, tools, pid }) => ({ server, state, tools, ...(pid ? { pid } : {}) })),
        });
        return;
      }
      if (req.method !== "GET" && req.method !== "HEAD") {
        json(res, 405, { error: "Only GET is served outside /mcp." });
        return;
      }
      return serveStatic(url.pathname, res, `${base}/mcp`, options.playgroundDir);
    };
    route().catch((error) => {
      if (!res.headersSent) rpcError(res, 500, `Internal error: ${(error as Error).message}`);
      else res.end();
    });
  });

  bound.ready();
  const { port } = server.address() as AddressInfo;
  const shownHost = options.host.includes(":") ? `[${options.host}]` : options.host;
  base = `http://${shownHost}:${port}`;
  return {
    url: `${base}/`,
    mcpUrl: `${base}/mcp`,
    port,
    async close() {
      clearInterval(sweeper);
      for (const [id, entry] of sessions) {
        sessions.delete(id);
        await entry.transport.close().catch(() => {});
      }
      server.closeAllConnections();
      await new Promise<void>((resolvePromise) => server.close(() => resolvePromise()));
    },
  };
}
