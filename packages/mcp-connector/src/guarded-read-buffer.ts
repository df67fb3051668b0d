import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";

/** Largest message (one line) read from a stdio server; a larger answer fails its call at once. */
export const MAX_DOWNSTREAM_MESSAGE_BYTES = 10 * 1024 * 1024;
/** Deepest nesting of objects and arrays accepted in a message from a downstream server. */
export const MAX_DOWNSTREAM_DEPTH = 1000;
/** Bytes of an oversized line kept to find its id, which JSON-RPC peers write near the start. */
const ID_SEARCH_BYTES = 64 * 1024;
/** Bytes kept from the end of an oversized line, where the SDK writes a response's `id`. */
const TAIL_BYTES = 256;
const INTERNAL_ERROR = -32603;

/** The top-level `id` of a JSON-RPC message written last, as `,"id":7}`, from the line's end. */
export function idAtEnd(tail: string): string | number | null {
  const match = /"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*\}\s*$/.exec(tail);
  return match ? (JSON.parse(match[1]!) as string | number) : null;
}

type Scan = { depth: number; id: string | number | null; isResponse: boolean };

/**
 * One pass over JSON text without parsing it: the deepest nesting, and the top-level `id` and whether
 * the message is a response (has a top-level `result` or `error`). Strings are skipped whole.
 */
export function scanJsonLine(text: string, stopAtDepth = Number.POSITIVE_INFINITY): Scan {
  let depth = 0;
  let deepest = 0;
  let id: string | number | null = null;
  let isResponse = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22 /* " */) {
      const start = index;
      for (index++; index < text.length; index++) {
        const inner = text.charCodeAt(index);
        if (inner === 0x5c /* \ */) index++;
        else if (inner === 0x22) break;
      }
      if (depth === 1) {
        const key = text.slice(start, index + 1);
        if (key === '"result"' || key === '"error"') isResponse = true;
        else if (key === '"id"' && id === null) {
          const match = /^\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)/.exec(text.slice(index + 1, index + 200));
          if (match) id = JSON.parse(match[1]!) as string | number;
        }
      }
    } else if (code === 0x7b /* { */ || code === 0x5b /* [ */) {
      depth++;
      if (depth > deepest) deepest = depth;
      if (deepest > stopAtDepth && id !== null && isResponse) break;
    } else if (code === 0x7d /* } */ || code === 0x5d /* ] */) depth--;
  }
  return { depth: deepest, id, isResponse };
}

function refusal(id: string | number, message: string): JSONRPCMessage {
  return { jsonrpc: "2.0", id, error: { code: INTERNAL_ERROR, message } } as JSONRPCMessage;
}

/**
 * Stands in for the SDK's stdio read buffer. The SDK's buffer closes the whole connection when a
 * message passes 10 MiB, and a message too deep for its schema check is dropped with no answer, so
 * the call waited for its timeout and was reported as "no answer". Here both become an error answer
 * to that request, at once, naming the limit; the connection goes on.
 */
export class GuardedReadBuffer {
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** While the rest of an oversized line is dropped: its id if the head had one, and its last bytes. */
  #skipping: { id: string | number | null; tail: string } | null = null;
  /** Parsed messages, and errors the SDK reports (as it did for a bad line) without closing. */
  readonly #ready: Array<JSONRPCMessage | Error> = [];
  readonly #maxBytes: number;
  readonly #maxDepth: number;

  constructor(options: { maxBytes?: number; maxDepth?: number } = {}) {
    this.#maxBytes = options.maxBytes ?? MAX_DOWNSTREAM_MESSAGE_BYTES;
    this.#maxDepth = options.maxDepth ?? MAX_DOWNSTREAM_DEPTH;
  }

  append(chunk: Buffer): void {
    let start = 0;
    while (start <= chunk.length) {
      const newline = chunk.indexOf(10, start);
      const piece = chunk.subarray(start, newline === -1 ? chunk.length : newline);
      if (this.#skipping) {
        this.#skipping.tail = (this.#skipping.tail + piece.subarray(-TAIL_BYTES).toString("latin1")).slice(
          -TAIL_BYTES,
        );
      } else if (this.#buffered + piece.length > this.#maxBytes) {
        this.#refuseOversized(piece);
      } else if (piece.length > 0 || newline !== -1) {
        this.#chunks.push(piece);
        this.#buffered += piece.length;
      }
      if (newline === -1) break;
      if (this.#skipping) this.#finishOversized();
      else this.#complete();
      start = newline + 1;
    }
  }

  #refuseOversized(piece: Buffer): void {
    const line = Buffer.concat([...this.#chunks, piece.subarray(0, ID_SEARCH_BYTES)]);
    this.#chunks = [];
    this.#buffered = 0;
    this.#skipping = {
      id: scanJsonLine(line.subarray(0, ID_SEARCH_BYTES).toString("utf8")).id,
      tail: piece.subarray(-TAIL_BYTES).toString("latin1"),
    };
  }

  /** The oversized line ended: its call is answered with an error (the SDK writes `id` last). */
  #finishOversized(): void {
    const skipped = this.#skipping!;
    this.#skipping = null;
    const id = skipped.id ?? idAtEnd(skipped.tail);
    if (id === null) return;
    this.#ready.push(
      refusal(
        id,
        `the server's answer is larger than ${this.#maxBytes} bytes (the gateway's limit for one MCP message) and was dropped; ask the tool for less (a page, a filter)`,
      ),
    );
  }

  #complete(): void {
    const line = Buffer.concat(this.#chunks).toString("utf8").replace(/\r$/, "");
    this.#chunks = [];
    this.#buffered = 0;
    if (line.trim() === "") return;
    const scan = scanJsonLine(line, this.#maxDepth);
    if (scan.depth > this.#maxDepth) {
      if (scan.id !== null && scan.isResponse) {
        this.#ready.push(
          refusal(
            scan.id,
            `the server's answer is nested more than ${this.#maxDepth} levels deep (the gateway's limit for MCP results) and was dropped`,
          ),
        );
      }
      return;
    }
    try {
      this.#ready.push(JSONRPCMessageSchema.parse(JSON.parse(line)));
    } catch (error) {
      this.#ready.push(error instanceof Error ? error : new Error(String(error)));
    }
  }

  readMessage(): JSONRPCMessage | null {
    const next = this.#ready.shift();
    if (next instanceof Error) throw next;
    return next ?? null;
  }

  clear(): void {
    this.#chunks = [];
    this.#buffered = 0;
    this.#skipping = null;
    this.#ready.length = 0;
  }
}

/**
 * Puts a guarded buffer in the SDK transport's place. The SDK keeps its buffer in a private
 * `_readBuffer` field; if a later SDK renames it this throws, so the change is caught by tests rather
 * than silently losing the guard.
 */
export function guardStdioTransport(transport: StdioClientTransport): void {
  const holder = transport as unknown as { _readBuffer?: unknown };
  if (!holder._readBuffer) {
    throw new Error(
      "The MCP SDK's stdio client transport has no _readBuffer field; update guardStdioTransport.",
    );
  }
  holder._readBuffer = new GuardedReadBuffer();
}
