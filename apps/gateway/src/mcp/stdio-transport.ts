import { idAtEnd, scanJsonLine } from "@codecell/mcp-connector";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { traceTransport } from "../debug-switches.js";
import type { Gateway } from "../gateway.js";
import { operatorLine } from "../logger.js";
import { LOCAL_PRINCIPAL } from "../sessions/run-owner.js";
import { createSessionServer } from "./mcp-front.js";
import { StdioEras } from "./stdio-eras.js";

/** Largest JSON-RPC message (one line) read from stdin; a longer one is refused and skipped. */
export const MAX_STDIO_MESSAGE_BYTES = 10 * 1024 * 1024;
/** Bytes of an oversized line kept to find its request id: at its start, or its end (the SDK's place). */
const ID_SEARCH_BYTES = 64 * 1024;
const TAIL_BYTES = 256;

/** JSON-RPC error codes this transport answers with. */
const INVALID_REQUEST = -32600;
const PARSE_ERROR = -32700;

/** How the stdio connection ended: the client closed stdin, or the transport failed. */
export type StdioEnd = { expected: true } | { expected: false; reason: string };

/**
 * MCP over this process's stdin/stdout, one JSON-RPC message per line. Unlike the SDK's transport
 * (which closes the connection, and so ended the gateway with exit code 0, when a message passed its
 * 10 MiB buffer), a message that is too large or not JSON-RPC is answered with a JSON-RPC error and the
 * connection keeps serving. Only the end of stdin closes it normally; a failing stream closes it as
 * unexpected, which the command logs and exits non-zero for.
 */
export class GatewayStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #stdin: NodeJS.ReadableStream;
  readonly #stdout: NodeJS.WritableStream;
  readonly #log: (line: string) => void;
  readonly #maxBytes: number;
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** Set while the rest of an oversized line is skipped. */
  #skipping: { bytes: number; id: string | number | null; tail: string } | null = null;
  #closed = false;
  #end: StdioEnd | null = null;

  constructor(
    options: {
      stdin?: NodeJS.ReadableStream;
      stdout?: NodeJS.WritableStream;
      log?: (line: string) => void;
      maxMessageBytes?: number;
    } = {},
  ) {
    this.#stdin = options.stdin ?? process.stdin;
    this.#stdout = options.stdout ?? process.stdout;
    this.#log = options.log ?? operatorLine;
    this.#maxBytes = options.maxMessageBytes ?? MAX_STDIO_MESSAGE_BYTES;
  }

  /** How the connection ended, once it has. */
  get end(): StdioEnd | null {
    return this.#end;
  }

  readonly #onData = (chunk: Buffer | string) => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    let start = 0;
    while (start < bytes.length) {
      const newline = bytes.indexOf(10, start);
      const piece = bytes.subarray(start, newline === -1 ? bytes.length : newline);
      if (this.#skipping) {
        this.#skipping.bytes += piece.length;
        this.#skipping.tail = (this.#skipping.tail + piece.subarray(-TAIL_BYTES).toString("latin1")).slice(
          -TAIL_BYTES,
        );
      } else if (this.#buffered + piece.length > this.#maxBytes) this.#refuseOversized(piece);
      else {
        this.#chunks.push(piece);
        this.#buffered += piece.length;
      }
      if (newline === -1) break;
      if (this.#skipping) this.#finishOversized();
      else {
        const line = Buffer.concat(this.#chunks).toString("utf8").replace(/\r$/, "");
        this.#chunks = [];
        this.#buffered = 0;
        if (line.trim() !== "") this.#handleLine(line);
      }
      start = newline + 1;
    }
  };

  /** Starts skipping an oversized line, keeping what finds its request id. */
  #refuseOversized(piece: Buffer): void {
    const head = Buffer.concat([...this.#chunks, piece.subarray(0, ID_SEARCH_BYTES)])
      .subarray(0, ID_SEARCH_BYTES)
      .toString("utf8");
    this.#skipping = {
      bytes: this.#buffered + piece.length,
      id: scanJsonLine(head).id,
      tail: piece.subarray(-TAIL_BYTES).toString("latin1"),
    };
    this.#chunks = [];
    this.#buffered = 0;
  }

  /** The oversized line ended: its request is answered with an error, and serving goes on. */
  #finishOversized(): void {
    const skipped = this.#skipping!;
    this.#skipping = null;
    this.#log(`refused a ${skipped.bytes}-byte message from the client (the limit is ${this.#maxBytes}).`);
    void this.#sendError(
      skipped.id ?? idAtEnd(skipped.tail),
      INVALID_REQUEST,
      `The message is larger than the gateway's limit of ${this.#maxBytes} bytes (${this.#maxBytes / (1024 * 1024)} MiB) and was not read. Send less per request: pass large data as workspace files, not inline.`,
    );
  }

  #handleLine(line: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (error) {
      this.#log(`refused a message that is not JSON: ${(error as Error).message}`);
      void this.#sendError(null, PARSE_ERROR, `The message is not JSON: ${(error as Error).message}`);
      return;
    }
    const checked = JSONRPCMessageSchema.safeParse(parsed);
    if (!checked.success) {
      const id = (parsed as { id?: unknown } | null)?.id;
      void this.#sendError(
        typeof id === "string" || typeof id === "number" ? id : null,
        INVALID_REQUEST,
        "The message is not a JSON-RPC 2.0 request, notification or response.",
      );
      return;
    }
    this.onmessage?.(checked.data);
  }

  #sendError(id: string | number | null, code: number, message: string): Promise<void> {
    return this.#write(`${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`);
  }

  readonly #onEnd = () => this.#finish({ expected: true });
  readonly #onStreamError = (error: Error) => {
    this.onerror?.(error);
    this.#finish({ expected: false, reason: error.message });
  };

  #finish(end: StdioEnd): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#end = end;
    this.#stdin.off("data", this.#onData);
    this.#stdin.off("end", this.#onEnd);
    this.#stdin.off("error", this.#onStreamError);
    this.#stdout.off("error", this.#onStreamError);
    this.#chunks = [];
    this.onclose?.();
  }

  async start(): Promise<void> {
    this.#stdin.on("data", this.#onData);
    this.#stdin.on("end", this.#onEnd);
    this.#stdin.on("error", this.#onStreamError);
    this.#stdout.on("error", this.#onStreamError);
  }

  #write(text: string): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolveWrite) => {
      if (this.#stdout.write(text)) resolveWrite();
      else this.#stdout.once("drain", () => resolveWrite());
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.#write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    if (!this.#closed) this.#finish(this.#end ?? { expected: true });
  }
}

/**
 * MCP over stdio: one process, one client, one session. Its id is stable (`stdio` unless `--session`
 * says otherwise), so a gateway restarted on a SQLite store can resume the runs the previous process
 * left waiting. A client of either protocol era is served (see stdio-eras.ts): both own their runs
 * as the same local owner. Resolves when the connection ends, saying whether that was the client
 * closing stdin.
 */
export async function serveStdio(gateway: Gateway, sessionId: string): Promise<StdioEnd> {
  const front = createSessionServer(gateway, () => sessionId);
  const transport = new GatewayStdioTransport();
  const owner = { principal: LOCAL_PRINCIPAL, conversation: sessionId };
  let modern: { close(): Promise<void> } | null = null;
  const eras = new StdioEras(transport, async (channel) => {
    const { serveModernStdio } = await import("./modern-stdio.js");
    modern = serveModernStdio(gateway, owner, channel as never);
  });
  const closed = new Promise<void>((resolvePromise) => {
    transport.onclose = () => resolvePromise();
  });
  transport.onmessage = (message) => eras.receive(message);
  await front.server.connect(eras.legacy);
  await transport.start();
  traceTransport(transport, () => `stdio ${sessionId}`);
  await closed;
  // stdin has closed: the client is gone, and a close that fails has no one to report to.
  await eras.ended();
  await front.server.close().catch(() => {});
  await (modern as { close(): Promise<void> } | null)?.close().catch(() => {});
  return transport.end ?? { expected: true };
}
