import type { Server as HttpServer, IncomingMessage, ServerResponse } from "node:http";

/** Why a gateway does not take new MCP sessions right now. */
export type NotReadyReason = "starting" | "draining";
/** Where a replica is in its life, as `/readyz` and the `codecell_ready` gauge tell it. */
export type ReadinessState = "ready" | NotReadyReason;

/**
 * The answer of `GET /readyz`: 200 `{"status":"ready"}` once `/mcp` takes sessions, otherwise 503
 * `{"status":"not_ready","reason":...}`. It says nothing else (no version, servers or counts), so it
 * needs no token.
 */
export function answerReadiness(res: ServerResponse, reason: NotReadyReason | null): void {
  const ready = reason === null;
  res
    .writeHead(ready ? 200 : 503, {
      "content-type": "application/json",
      "cache-control": "no-store",
      ...(ready ? {} : { "retry-after": "1" }),
    })
    .end(JSON.stringify(ready ? { status: "ready" } : { status: "not_ready", reason }));
}

/** What a drain left behind when its time ran out (all zero when everything ended in time). */
export type DrainReport = { requests: number; calls: number; waitedMs: number };

/**
 * A gateway's readiness for load balancers and its drain at shutdown. Starting: not ready. Ready once
 * the transport takes sessions. Draining (SIGTERM): not ready again, new MCP sessions are refused with
 * 503 so the balancer sends them to another replica, no connection is kept alive, and the stop waits
 * for requests in flight (and nested calls still running for waiting runs) up to its bound.
 */
export class Readiness {
  #state: ReadinessState = "starting";
  #openRequests = 0;
  #changed: (() => void) | null = null;

  /**
   * Counts the requests that carry work: POSTs (an exec or wait answers on its POST's stream). A GET
   * stream for notifications stays open for as long as the session lives, so a drain does not wait for it.
   */
  watch(server: HttpServer): void {
    server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
      // While draining, connections are not kept for another request.
      if (this.#state === "draining") res.setHeader("connection", "close");
      if (req.method !== "POST") return;
      this.#openRequests += 1;
      res.once("close", () => {
        this.#openRequests -= 1;
        this.#changed?.();
      });
    });
  }

  get state(): ReadinessState {
    return this.#state;
  }

  /** `/mcp` takes sessions from now on. */
  ready(): void {
    if (this.#state === "starting") this.#state = "ready";
  }

  /**
   * Answers `/readyz`, and while draining a request for a new MCP session; true when it answered (the
   * transport's routing line). Requests of existing sessions go on, so runs in flight can finish.
   */
  route(req: IncomingMessage, res: ServerResponse, pathname: string): boolean {
    if (pathname === "/readyz") {
      if (req.method !== "GET" && req.method !== "HEAD") {
        res
          .writeHead(405, { "content-type": "application/json", allow: "GET, HEAD" })
          .end(JSON.stringify({ error: "Only GET is served at /readyz." }));
        return true;
      }
      answerReadiness(res, this.#state === "ready" ? null : this.#state);
      return true;
    }
    if (this.#state === "draining" && pathname === "/mcp" && req.headers["mcp-session-id"] === undefined) {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1", connection: "close" }).end(
        JSON.stringify({
          jsonrpc: "2.0",
          error: { code: -32000, message: "This codecell replica is shutting down; connect to another one." },
          id: null,
        }),
      );
      return true;
    }
    return false;
  }

  /**
   * Stops taking work and waits until no request is in flight and `callsInFlight()` is 0, at most
   * `timeoutMs`. Answers what was still open when it stopped waiting.
   */
  async drain(server: HttpServer, timeoutMs: number, callsInFlight: () => number): Promise<DrainReport> {
    this.#state = "draining";
    const started = Date.now();
    // Still listening, so probes read 503 "draining" rather than a refused connection; idle
    // keep-alive connections close now, busy ones after their response (Connection: close).
    server.closeIdleConnections();
    const open = () => ({ requests: this.#openRequests, calls: callsInFlight() });
    await new Promise<void>((resolve) => {
      const check = () => {
        const now = open();
        if ((now.requests === 0 && now.calls === 0) || Date.now() - started >= timeoutMs) {
          clearInterval(poll);
          clearTimeout(deadline);
          this.#changed = null;
          resolve();
        }
      };
      // Requests say when they end; nested calls are counted by the engine, so they are looked at often.
      const poll = setInterval(check, 100);
      const deadline = setTimeout(check, timeoutMs);
      this.#changed = check;
      check();
    });
    return { ...open(), waitedMs: Date.now() - started };
  }
}
