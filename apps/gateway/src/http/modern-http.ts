import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { createMcpHandler, isLegacyRequest, type McpHttpHandler } from "@modelcontextprotocol/server";
import type { Gateway } from "../gateway.js";
import { createModernServer } from "../mcp/modern-front.js";
import type { RunOwner } from "../sessions/run-owner.js";

/**
 * The 2026-07-28 side of `/mcp`, on SDK v2's stateless handler: a fresh server object per request (see
 * modern-front.ts), `server/discover`, the per-request `_meta` envelope and its checks, and
 * `subscriptions/listen` for `notifications/tools/list_changed`. Older clients (an `initialize`, a
 * request without the envelope) never reach it: `isLegacy` sends them to the session transport.
 */
export type ModernHttp = {
  /** True when the request belongs to the session era (asks the SDK's own classification). */
  isLegacy(req: IncomingMessage, body: unknown): Promise<boolean>;
  /** Serves one 2026-07-28 request for `principal`, its runs scoped by `scope` when the client sent one. */
  handle(
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    principal: string,
    scope: string | undefined,
  ): Promise<void>;
  close(): Promise<void>;
};

/** The conversation of a 2026-07-28 client that names no scope: all of its principal's runs. */
export const PRINCIPAL_WIDE_SCOPE = "";

/** A Node request as a web `Request` (its body already read and parsed, so handed over as text). */
function webRequest(req: IncomingMessage, body: unknown, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const url = new URL(req.url ?? "/mcp", `http://${req.headers.host ?? "localhost"}`);
  const hasBody = req.method === "POST" && body !== undefined;
  return new Request(url, {
    method: req.method ?? "GET",
    headers,
    signal,
    ...(hasBody ? { body: JSON.stringify(body) } : {}),
  });
}

/** Writes a web `Response` to a Node response, streaming its body (an SSE answer stays open until done). */
async function sendResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream);
  for await (const chunk of body) {
    if (res.destroyed) break;
    res.write(chunk);
  }
  res.end();
}

export function createModernHttp(gateway: Gateway): ModernHttp {
  const handler: McpHttpHandler = createMcpHandler(
    (context) => {
      const principal = context.authInfo?.clientId ?? "local";
      const scope = (context.authInfo?.extra as { scope?: string } | undefined)?.scope;
      const owner: RunOwner = { principal, conversation: scope ?? PRINCIPAL_WIDE_SCOPE };
      const headers: Record<string, string> = {};
      context.requestInfo?.headers.forEach((value, name) => {
        headers[name] = value;
      });
      return createModernServer(gateway, { owner, transport: "http", headers });
    },
    // Older clients are served by the session transport in front of this handler, never statelessly.
    { legacy: "reject" },
  );
  // A downstream server changed its tools: clients listening with subscriptions/listen are told.
  const unsubscribe = gateway.onToolsChanged(() => handler.notify.toolsChanged());
  return {
    async isLegacy(req, body) {
      return isLegacyRequest(webRequest(req, body, new AbortController().signal), body);
    },
    async handle(req, res, body, principal, scope) {
      const abort = new AbortController();
      // The client went away before its answer: the request's signal aborts, and with it the run.
      res.once("close", () => {
        if (!res.writableEnded) abort.abort();
      });
      const response = await handler.fetch(webRequest(req, body, abort.signal), {
        ...(body !== undefined ? { parsedBody: body } : {}),
        authInfo: { token: "", clientId: principal, scopes: [], ...(scope ? { extra: { scope } } : {}) },
      });
      await sendResponse(response, res);
    },
    async close() {
      unsubscribe();
      await handler.close();
    },
  };
}
