import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  idAtEnd,
  MAX_DOWNSTREAM_DEPTH,
  MAX_DOWNSTREAM_MESSAGE_BYTES,
  scanJsonLine,
} from "./guarded-read-buffer.js";

/** Characters of an oversized message kept to find its id: at its start, and at its end. */
const HEAD_CHARS = 64 * 1024;
const TAIL_CHARS = 256;
const INTERNAL_ERROR = -32603;

type Limits = { maxBytes: number; maxDepth: number };

const tooLarge = (limits: Limits) =>
  `the server's answer is larger than ${limits.maxBytes} bytes (the gateway's limit for one MCP message) and was dropped; ask the tool for less (a page, a filter)`;
const tooDeep = (limits: Limits) =>
  `the server's answer is nested more than ${limits.maxDepth} levels deep (the gateway's limit for MCP results) and was dropped`;

function refusal(id: string | number, message: string): string {
  return JSON.stringify({ jsonrpc: "2.0", id, error: { code: INTERNAL_ERROR, message } });
}

/** Ids of the requests a POST carries (its answers may come back as JSON or on its SSE stream). */
function requestIdsOf(body: unknown): Array<string | number> {
  if (typeof body !== "string") return [];
  try {
    const parsed = JSON.parse(body) as unknown;
    return (Array.isArray(parsed) ? parsed : [parsed]).flatMap((message) => {
      const { id, method } = (message ?? {}) as { id?: unknown; method?: unknown };
      return typeof method === "string" && (typeof id === "string" || typeof id === "number") ? [id] : [];
    });
  } catch {
    return [];
  }
}

/**
 * Checks one complete message: too deep, and a response, becomes an error answer to its request.
 * Returns the text to pass on, or null to drop it (too deep and not an answer to anything).
 */
function checkMessage(text: string, limits: Limits): string | null {
  const scan = scanJsonLine(text, limits.maxDepth);
  if (scan.depth <= limits.maxDepth) return text;
  return scan.id !== null && scan.isResponse ? refusal(scan.id, tooDeep(limits)) : null;
}

/**
 * An SSE body with each event's data checked: an event larger than the limit is dropped as it
 * streams (only its head and tail are kept, to find the id) and one too deep is checked whole; either
 * becomes an error answer to its request, so the call fails at once naming the limit.
 */
function guardEventStream(
  body: ReadableStream<Uint8Array>,
  requestIds: Array<string | number>,
  limits: Limits,
): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let fields: string[] = []; // the current event's lines other than data
  let data: string[] = [];
  let dataChars = 0;
  let skipping: { head: string; tail: string } | null = null;

  const fallbackId = () => (requestIds.length === 1 ? requestIds[0]! : null);

  function endEvent(out: TransformStreamDefaultController<Uint8Array>): void {
    let text: string | null = null;
    if (skipping) {
      const id = scanJsonLine(skipping.head).id ?? idAtEnd(skipping.tail) ?? fallbackId();
      text = id === null ? null : refusal(id, tooLarge(limits));
    } else if (data.length > 0) {
      text = checkMessage(data.join("\n"), limits);
    }
    if (text !== null || (data.length === 0 && !skipping)) {
      const lines = [...fields, ...(text !== null ? [`data: ${text}`] : [])];
      if (lines.length > 0) out.enqueue(encoder.encode(`${lines.join("\n")}\n\n`));
    }
    fields = [];
    data = [];
    dataChars = 0;
    skipping = null;
  }

  function line(raw: string, out: TransformStreamDefaultController<Uint8Array>): void {
    const text = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (text === "") {
      endEvent(out);
      return;
    }
    if (!text.startsWith("data:")) {
      fields.push(text);
      return;
    }
    const value = text.slice(text.startsWith("data: ") ? 6 : 5);
    if (skipping) {
      skipping.tail = (skipping.tail + value).slice(-TAIL_CHARS);
      return;
    }
    dataChars += value.length;
    if (dataChars > limits.maxBytes) {
      const joined = [...data, value].join("\n");
      skipping = { head: joined.slice(0, HEAD_CHARS), tail: joined.slice(-TAIL_CHARS) };
      data = [];
      return;
    }
    data.push(value);
  }

  // The line being read, in pieces (so a long line is never searched or copied again and again).
  let parts: string[] = [];
  let partsChars = 0;
  /** Set while a data line past the limit is read: its head and tail are all that is kept. */
  let longLine: { head: string; tail: string } | null = null;

  function piece(text: string): void {
    if (longLine) {
      longLine.tail = (longLine.tail + text).slice(-TAIL_CHARS);
      return;
    }
    parts.push(text);
    partsChars += text.length;
    if (dataChars + partsChars > limits.maxBytes + 6 && parts[0]?.startsWith("data:")) {
      const joined = parts.join("");
      const value = joined.slice(joined.startsWith("data: ") ? 6 : 5);
      longLine = {
        head: [...data, value.slice(0, HEAD_CHARS)].join("\n").slice(0, HEAD_CHARS),
        tail: value.slice(-TAIL_CHARS),
      };
      parts = [];
      partsChars = 0;
    }
  }

  function endLine(out: TransformStreamDefaultController<Uint8Array>): void {
    if (longLine) {
      skipping ??= { head: longLine.head, tail: "" };
      skipping.tail = longLine.tail;
      data = [];
      longLine = null;
    } else line(parts.join(""), out);
    parts = [];
    partsChars = 0;
  }

  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        const text = decoder.decode(chunk, { stream: true });
        let start = 0;
        let newline = text.indexOf("\n");
        while (newline !== -1) {
          piece(text.slice(start, newline));
          endLine(out);
          start = newline + 1;
          newline = text.indexOf("\n", start);
        }
        if (start < text.length) piece(text.slice(start));
      },
      flush(out) {
        const rest = decoder.decode();
        if (rest !== "") piece(rest);
        if (parts.length > 0 || longLine) endLine(out);
        if (fields.length > 0 || data.length > 0 || skipping) endEvent(out);
      },
    }),
  );
}

/** Reads a JSON body up to the limit; null when it is larger. */
async function readLimited(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<string | null> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * A fetch for the SDK's HTTP client transports (Streamable HTTP and SSE) that holds a downstream
 * server's answers to the same limits as the stdio guard: larger than 10 MiB or nested deeper than
 * 1,000 levels, an answer becomes a JSON-RPC error for its request, so the call fails at once as
 * `nested_tool_failed` naming the limit. Without it the SDK dropped such a message (its schema check
 * failed) and the call waited for its timeout, reported as "no answer".
 */
export function guardedFetch(
  base: FetchLike = fetch,
  options: { maxBytes?: number; maxDepth?: number } = {},
): FetchLike {
  const limits: Limits = {
    maxBytes: options.maxBytes ?? MAX_DOWNSTREAM_MESSAGE_BYTES,
    maxDepth: options.maxDepth ?? MAX_DOWNSTREAM_DEPTH,
  };
  return async (url, init) => {
    const response = await base(url, init);
    if (!response.body) return response;
    const type = response.headers.get("content-type") ?? "";
    const ids = requestIdsOf(init?.body);
    const rebuilt = (body: ConstructorParameters<typeof Response>[0]) =>
      new Response(body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    if (type.includes("text/event-stream")) return rebuilt(guardEventStream(response.body, ids, limits));
    if (type.includes("application/json") && response.ok) {
      const text = await readLimited(response.body, limits.maxBytes);
      if (text === null) {
        const answers = ids.map((id) => refusal(id, tooLarge(limits)));
        return rebuilt(answers.length === 1 ? answers[0]! : `[${answers.join(",")}]`);
      }
      const checked = checkMessage(text, limits);
      if (checked !== null) return rebuilt(checked);
      const answers = ids.map((id) => refusal(id, tooDeep(limits)));
      return rebuilt(answers.length === 1 ? answers[0]! : `[${answers.join(",")}]`);
    }
    return response;
  };
}
