import { randomUUID } from "node:crypto";
import type { Server as HttpServer, IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CodeModeError } from "@codecell/contract";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_HTTP_SETTINGS, type HttpSettings } from "../config/load-config.js";
import { traceSse, traceTransport } from "../debug-switches.js";
import type { Gateway } from "../gateway.js";
import { AGENT_PATH_PREFIX, AGENT_ROUTES, createAgentRoutes, MESSAGES_PATH } from "./agent-http.js";
import { BoundedEventStore } from "./event-store.js";
import { HostCheck, isLoopbackHost } from "./host-check.js";
import { BearerTokens, bearerChallenge } from "./http-auth.js";
import { listenHttp } from "./http-listen.js";
import { createModernHttp } from "./modern-http.js";

// The CLI binds the port itself before the gateway starts; it loads both with this module.
export { ListenError, listenHttp } from "./http-listen.js";

import { createSessionServer } from "../mcp/mcp-front.js";
import { GATEWAY_VERSION } from "../version.js";
import { HttpSessionTable } from "./http-sessions.js";
import { serveMetrics } from "./metrics-route.js";
import type { Readiness } from "./readiness.js";
import { serveStatic } from "./static-site.js";

const MAX_BODY_BYTES = 4 * 1024 * 1024;
const SWEEP_INTERVAL_MS = 30 * 1000;
/** The header a client sends to name its conversation: runs it starts belong to that conversation. */
export const CONVERSATION_HEADER = "codecell-session";
const MAX_CONVERSATION_LENGTH = 200;

export type HttpServeOptions = {
  port: number;
  host: string;
  playgroundDir?: string;
  /** Tokens, allowed hosts and session limits; default: the config's `http` section. */
  settings?: HttpSettings;
  /** A server already bound with `listenHttp` (so the port was checked before the gateway started). */
  bound?: { server: HttpServer; ready(): void };
  /** Answers `/readyz` and refuses new sessions while draining (see readiness.ts). */
  readiness?: Readiness;
};
export type RunningHttpServer = {
  url: string;
  mcpUrl: string;
  /** The agent endpoint's routes with their full URLs; empty without an `agent` section. */
  agentRoutes: { api: string; url: string }[];
  port: number;
  close(): Promise<void>;
};

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

function rpcError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  json(res, status, { jsonrpc: "2.0", error: { code: -32000, message }, id: null }, headers);
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
 * Origin are accepted only from loopback origins or a host the gateway answers to.
 */
function originAllowed(req: IncomingMessage, hosts: HostCheck): boolean {
  const origin = req.headers.origin;
  if (!origin) return true;
  try {
    const { hostname, host } = new URL(origin);
    return isLoopbackHost(hostname) || hosts.allows(host);
  } catch {
    return false;
  }
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The client's `codecell-session` header, trimmed: undefined when absent, null (after answering 400)
 * when it is empty or too long.
 */
function conversationOf(req: IncomingMessage, res: ServerResponse): string | undefined | null {
  const value = headerValue(req, CONVERSATION_HEADER)?.trim();
  if (value !== undefined && (value === "" || value.length > MAX_CONVERSATION_LENGTH)) {
    rpcError(
      res,
      400,
      `The ${CONVERSATION_HEADER} header must be 1 to ${MAX_CONVERSATION_LENGTH} characters.`,
    );
    return null;
  }
  return value;
}

/** Request ids of a POSTed JSON-RPC message or batch (notifications and responses have none). */
function requestIds(body: unknown): Array<string | number> {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((message) => {
    const { id, method } = (message ?? {}) as { id?: unknown; method?: unknown };
    return typeof method === "string" && (typeof id === "string" || typeof id === "number") ? [id] : [];
  });
}

function cancelRequests(transport: StreamableHTTPServerTransport, body: unknown, reason: string): void {
  for (const requestId of requestIds(body)) {
    transport.onmessage?.({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId, reason },
    });
  }
}

/**
 * Requests whose HTTP stream dropped before their answer. The client may come back with
 * `Last-Event-ID` (the SDK clients do within seconds) and get the answer from the event store, so the
 * cancellation waits `graceMs`; a resume on the session calls it off. With a grace of 0 it is at once.
 */
class DroppedStreams {
  readonly #graceMs: number;
  readonly #pending = new Map<string, Set<NodeJS.Timeout>>();

  constructor(graceMs: number) {
    this.#graceMs = graceMs;
  }

  add(sessionId: string, cancel: () => void): void {
    if (this.#graceMs <= 0) {
      cancel();
      return;
    }
    const timers = this.#pending.get(sessionId) ?? new Set();
    const timer = setTimeout(() => {
      timers.delete(timer);
      cancel();
    }, this.#graceMs);
    timer.unref();
    timers.add(timer);
    this.#pending.set(sessionId, timers);
  }

  resumed(sessionId: string): void {
    this.forget(sessionId);
  }

  forget(sessionId: string): void {
    for (const timer of this.#pending.get(sessionId) ?? []) clearTimeout(timer);
    this.#pending.delete(sessionId);
  }
}

/**
 * Refuses a bind that others can reach when nobody has to authenticate: a gateway runs code and writes
 * files, so beyond loopback it needs `http.tokens`.
 */
export function checkHttpExposure(host: string, settings: HttpSettings): void {
  if (isLoopbackHost(host) || settings.tokens.length > 0) return;
  throw new CodeModeError(
    "invalid_config",
    `--host ${host} lets other machines reach the gateway, but the config has no http.tokens, so anyone could run code with its tools. Add "http": { "tokens": [{ "name": "me", "token": "\${CODECELL_TOKEN}" }] } to the config, or serve on 127.0.0.1.`,
  );
}

/** MCP over Streamable HTTP at /mcp, health at /healthz, the playground at / (and its assets). */
export async function serveHttp(gateway: Gateway, options: HttpServeOptions): Promise<RunningHttpServer> {
  const settings = options.settings ?? gateway.config.http ?? DEFAULT_HTTP_SETTINGS;
  checkHttpExposure(options.host, settings);
  const tokens = new BearerTokens(settings.tokens);
  const hosts = new HostCheck(options.host, settings.allowedHosts);
  const sessions = new HttpSessionTable({
    maxSessionsPerPrincipal: settings.maxSessionsPerPrincipal,
    idleMs: settings.sessionIdleMs,
    holdingIdleMs: Math.max(settings.sessionIdleMs, gateway.config.codeMode.snapshotTtlSeconds * 1000),
  });
  let base = "";
  const modern = createModernHttp(gateway);
  const dropped = new DroppedStreams(settings.streamResumeMs);

  async function handleMcp(req: IncomingMessage, res: ServerResponse, principal: string): Promise<void> {
    const sessionId = headerValue(req, "mcp-session-id");
    let body: unknown;
    if (req.method === "POST") {
      try {
        body = await readBody(req);
      } catch (error) {
        json(res, 400, {
          jsonrpc: "2.0",
          error: { code: -32700, message: `Parse error: ${(error as Error).message}` },
          id: null,
        });
        return;
      }
    }
    // A 2026-07-28 request (it carries the per-request envelope) is served statelessly by SDK v2; the
    // session era (initialize, Mcp-Session-Id) goes on below, on the session transport.
    if (!(await modern.isLegacy(req, body))) {
      const scope = conversationOf(req, res);
      if (scope === null) return;
      await modern.handle(req, res, body, principal, scope);
      return;
    }
    if (sessionId) {
      const entry = sessions.get(sessionId);
      // Another principal's session id is answered like an unknown one: it reveals nothing.
      if (!entry || entry.principal !== principal) {
        rpcError(res, 404, "Unknown or expired MCP session; start a new one with an initialize request.");
        return;
      }
      entry.open++;
      entry.lastSeen = Date.now();
      // A client resuming its streams (Last-Event-ID) is back: what it left running goes on.
      if (req.method === "GET" && headerValue(req, "last-event-id")) dropped.resumed(sessionId);
      res.once("close", () => {
        entry.open--;
        entry.lastSeen = Date.now();
        // The client went away before its answer: unless it resumes the stream within the grace
        // period, cancel what it asked for, as if it had sent notifications/cancelled, so its runs and
        // their nested calls stop.
        if (!res.writableEnded && requestIds(body).length > 0) {
          dropped.add(sessionId, () =>
            cancelRequests(entry.transport, body, "The HTTP client went away and did not resume."),
          );
        }
      });
      traceSse(res, `http ${sessionId}`);
      await entry.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== "POST") {
      // Clients read 405 on GET as "this server offers no standalone stream without a session".
      rpcError(res, 405, "Method not allowed without an MCP session: POST an initialize request first.", {
        allow: "POST",
      });
      return;
    }
    if (!isInitializeRequest(body)) {
      rpcError(
        res,
        400,
        "No MCP session: send an initialize request first (without an Mcp-Session-Id header).",
      );
      return;
    }
    if (!(await sessions.makeRoom(principal))) {
      rpcError(
        res,
        503,
        `Too many MCP sessions for "${principal}" (${settings.maxSessionsPerPrincipal}), all busy or holding waiting runs; close some (DELETE /mcp) and retry.`,
        { "retry-after": "5" },
      );
      return;
    }
    const conversationHeader = conversationOf(req, res);
    if (conversationHeader === null) return;
    let id = "";
    const front = createSessionServer(
      gateway,
      () => id,
      () => ({
        principal,
        conversation: conversationHeader ?? `mcp:${id}`,
      }),
    );
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new BoundedEventStore(),
      onsessioninitialized: (newId) => {
        id = newId;
        const entry = {
          id: newId,
          principal,
          transport,
          lastSeen: Date.now(),
          open: 1,
          holdsWaitingRun: () => front.peekSession()?.holdsWaitingRun ?? false,
        };
        sessions.add(entry);
        res.once("close", () => {
          entry.open--;
          entry.lastSeen = Date.now();
        });
      },
    });
    transport.onclose = () => {
      if (id) {
        sessions.delete(id);
        dropped.forget(id);
      }
      front.peekSession()?.end();
    };
    await front.server.connect(transport);
    traceTransport(transport, () => `http ${id || "(initializing)"}`);
    traceSse(res, "http (initialize)");
    await transport.handleRequest(req, res, body);
  }

  const agentRoutes = createAgentRoutes(gateway);
  const sweeper = setInterval(() => void sessions.sweep(), SWEEP_INTERVAL_MS);
  sweeper.unref();

  const bound = options.bound ?? (await listenHttp(options.port, options.host));
  const server: HttpServer = bound.server;
  server.on("request", (req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://localhost");
    } catch {
      // A target no URL parser takes (such as "//[" ): the client's mistake, said as such.
      json(res, 400, { error: "The request's path is not a valid URL path." });
      return;
    }
    const route = async () => {
      // Before the Host check: a probe sends the pod's address, and the answer reveals only ready or not.
      if (options.readiness?.route(req, res, url.pathname)) return;
      if (!hosts.allows(req.headers.host)) {
        json(res, 403, {
          error: `Host "${req.headers.host ?? ""}" is not one this gateway answers to. Use the address it is bound to, or add the name to http.allowedHosts.`,
        });
        return;
      }
      if (!originAllowed(req, hosts)) {
        json(res, 403, { error: `Origin ${req.headers.origin} is not allowed to use this gateway.` });
        return;
      }
      const auth = tokens.authenticate(req, { apiKeyHeader: url.pathname === MESSAGES_PATH });
      if (url.pathname === "/mcp") {
        if (!auth.ok) {
          json(
            res,
            401,
            {
              jsonrpc: "2.0",
              error: {
                code: -32001,
                message:
                  auth.reason === "missing"
                    ? "This gateway needs a bearer token: send Authorization: Bearer <token>."
                    : "The bearer token is not valid.",
              },
              id: null,
            },
            { "www-authenticate": bearerChallenge(auth.reason) },
          );
          return;
        }
        return handleMcp(req, res, auth.principal);
      }
      if (url.pathname.startsWith(AGENT_PATH_PREFIX)) return agentRoutes(req, res, auth, url.pathname);
      if (url.pathname === "/metrics") return serveMetrics(gateway, req, res, auth);
      if (url.pathname === "/healthz") {
        if (req.method !== "GET" && req.method !== "HEAD") {
          json(res, 405, { error: "Only GET is served at /healthz." }, { allow: "GET, HEAD" });
          return;
        }
        // Without a token (when tokens are set) it says ok and nothing else: no servers, no pids.
        if (!auth.ok) {
          json(res, 200, { status: "ok" });
          return;
        }
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
      if (req.method === "GET" || req.method === "HEAD") {
        if (await serveStatic(url.pathname, res, `${base}/mcp`, options.playgroundDir)) return;
      }
      // Claude Code (and other Anthropic clients) check that the base URL answers before their first
      // request: the gateway answers there without a playground built too.
      if (req.method === "HEAD" && url.pathname === "/") {
        res.writeHead(200).end();
        return;
      }
      json(res, 404, {
        error: `Nothing at ${url.pathname}. This gateway serves MCP at /mcp, health at /healthz and the playground at /.`,
      });
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
    agentRoutes: gateway.config.agent
      ? AGENT_ROUTES.map(({ api, path }) => ({ api, url: `${base}${path}` }))
      : [],
    port,
    async close() {
      clearInterval(sweeper);
      await sessions.closeAll();
      await modern.close();
      server.closeAllConnections();
      await new Promise<void>((resolvePromise) => server.close(() => resolvePromise()));
    },
  };
}
