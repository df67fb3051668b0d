import {
  createServer,
  type Server as HttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { answerReadiness } from "./readiness.js";

/** The port could not be bound: taken by another program, or not permitted. Says what to do. */
export class ListenError extends Error {
  readonly port: number;
  readonly host: string;
  readonly reason: "in_use" | "not_permitted" | "no_such_address";
  constructor(port: number, host: string, reason: ListenError["reason"], message: string) {
    super(message);
    this.name = "ListenError";
    this.port = port;
    this.host = host;
    this.reason = reason;
  }
}

function explain(error: NodeJS.ErrnoException, port: number, host: string): Error {
  const where = `port ${port} on ${host}`;
  if (error.code === "EADDRINUSE") {
    return new ListenError(
      port,
      host,
      "in_use",
      `${where} is already in use (another codecell, or another program). Stop that program, or serve on another port: codecell serve --http ${port === 65535 ? port - 1 : port + 1} (npm start -- --http ${port === 65535 ? port - 1 : port + 1}), or --http 0 for any free port.`,
    );
  }
  if (error.code === "EACCES") {
    return new ListenError(
      port,
      host,
      "not_permitted",
      `${where} is not permitted for this user (ports below 1024 need privileges). Serve on a port from 1024 up, e.g. --http 8787.`,
    );
  }
  if (error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND") {
    return new ListenError(
      port,
      host,
      "no_such_address",
      `${host} is not an address of this machine, so ${where} cannot be bound. Use --host 127.0.0.1 (this machine only) or one of its own addresses.`,
    );
  }
  return error;
}

/**
 * Binds the HTTP port before anything else starts, so a taken port fails in a second with one clear line
 * instead of after every downstream server was started. Until the gateway takes over the server (by
 * adding its own "request" listener and calling the returned `ready`), requests get 503 "starting".
 */
export async function listenHttp(port: number, host: string): Promise<{ server: HttpServer; ready(): void }> {
  const starting = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.split("?")[0] === "/readyz") {
      answerReadiness(res, "starting");
      return;
    }
    res
      .writeHead(503, { "content-type": "application/json", "retry-after": "1" })
      .end(JSON.stringify({ error: "codecell is starting; retry in a moment." }));
  };
  const server = createServer(starting);
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(explain(error, port, host));
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  return { server, ready: () => server.off("request", starting) };
}
