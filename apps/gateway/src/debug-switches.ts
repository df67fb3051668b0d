import type { ServerResponse } from "node:http";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { type LogFields, log, operatorLine } from "./logger.js";

/**
 * The operator's debug switches, read from the environment once per process. Every line goes to
 * stderr, never to stdout: over stdio, stdout is the MCP transport and one stray line breaks the client.
 *
 * - `CODECELL_DEBUG_CODE_MODE=1`: activation and one line per exec/wait (the engine) and per nested call.
 * - `CODECELL_DEBUG_MODEL_PAYLOAD=tools`: the tool list each client receives;
 *   `=full-redacted`: that, plus a bounded, redacted snapshot of every tool result sent back.
 * - `CODECELL_DEBUG_MODEL_TRANSPORT=1`: every MCP message in and out, one line each (bounded, redacted).
 * - `CODECELL_DEBUG_SSE=events`: one line per HTTP SSE event; `=peek`: the first five events of each
 *   stream with their data (redacted), then nothing more for that stream.
 */
export type DebugSwitches = {
  codeMode: boolean;
  payload: "tools" | "full-redacted" | null;
  transport: boolean;
  sse: "events" | "peek" | null;
};

/** The tag of `CODECELL_DEBUG_CODE_MODE`'s lines (the engine's and the nested calls'). */
export const CODE_MODE_DEBUG_TAG = "code-mode";

/** Longest line a switch writes; a longer message is cut with its full length named. */
const MAX_LINE_CHARS = 2000;
/** Longest string kept inside a redacted snapshot. */
const MAX_STRING_CHARS = 200;
const MAX_DEPTH = 12;
/** Events with data shown per SSE stream under `peek`. */
export const SSE_PEEK_EVENTS = 5;
/** Keys whose values never reach a debug line. */
const SECRET_KEY =
  /token|secret|password|passwd|authorization|api[-_]?key|cookie|credential|private[-_]?key/i;

function pick<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T | null {
  if (value === undefined || value === "" || value === "0") return null;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  operatorLine(`warning: ${name}=${value} is not one of ${allowed.join(", ")}; the switch is off.`);
  return null;
}

export function readDebugSwitches(env: NodeJS.ProcessEnv = process.env): DebugSwitches {
  return {
    codeMode: pick("CODECELL_DEBUG_CODE_MODE", env.CODECELL_DEBUG_CODE_MODE, ["1"]) !== null,
    payload: pick("CODECELL_DEBUG_MODEL_PAYLOAD", env.CODECELL_DEBUG_MODEL_PAYLOAD, [
      "tools",
      "full-redacted",
    ]),
    transport: pick("CODECELL_DEBUG_MODEL_TRANSPORT", env.CODECELL_DEBUG_MODEL_TRANSPORT, ["1"]) !== null,
    sse: pick("CODECELL_DEBUG_SSE", env.CODECELL_DEBUG_SSE, ["events", "peek"]),
  };
}

let cached: DebugSwitches | null = null;
/** The switches of this process (read on first use). */
export function debugSwitches(): DebugSwitches {
  cached ??= readDebugSwitches();
  return cached;
}

/** One debug line on stderr, tagged with its switch, cut at a bound. */
export function debugLine(tag: string, text: string, maxChars = MAX_LINE_CHARS, fields?: LogFields): void {
  const line = text.length > maxChars ? `${text.slice(0, maxChars)}… (${text.length} chars)` : text;
  const flat = line.replace(/\n/g, "\\n");
  log("debug", flat, { tag, ...fields }, `[codecell:${tag}] ${flat}`);
}

/**
 * A copy of a value safe to log: values under secret-looking keys replaced, long strings cut, deep
 * nesting stopped. What a cell returns may hold anything, so no debug line shows a value whole.
 */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === "string") {
    // A JSON text (a tool result's text item holds the result as JSON) is redacted as the value it is.
    if (/^\s*[[{]/.test(value)) {
      try {
        return { json: redact(JSON.parse(value), depth + 1) };
      } catch {
        // Not JSON after all: cut like any string.
      }
    }
    return value.length > MAX_STRING_CHARS
      ? `${value.slice(0, MAX_STRING_CHARS)}… (${value.length} chars)`
      : value;
  }
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return "[deeper]";
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    copy[key] = SECRET_KEY.test(key) ? "[redacted]" : redact(item, depth + 1);
  }
  return copy;
}

function describeMessage(message: JSONRPCMessage): string {
  return JSON.stringify(redact(message));
}

/**
 * `CODECELL_DEBUG_MODEL_TRANSPORT=1`: logs every message the transport receives and sends, one line
 * each. Call after the server connected (it wraps the handlers the server installed).
 */
export function traceTransport(transport: Transport, label: () => string): void {
  if (!debugSwitches().transport) return;
  const receive = transport.onmessage;
  if (receive) {
    transport.onmessage = (message, extra) => {
      debugLine("transport", `${label()} in  ${describeMessage(message)}`);
      receive.call(transport, message, extra);
    };
  }
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    debugLine("transport", `${label()} out ${describeMessage(message)}`);
    return send(message, options);
  };
}

/**
 * `CODECELL_DEBUG_SSE`: logs the SSE events written on one HTTP response (the SDK writes one event per
 * write: `event:`, `id:` and `data:` lines). Responses that are not event streams are left alone.
 */
let streams = 0;
export function traceSse(res: ServerResponse, label: string): void {
  const mode = debugSwitches().sse;
  if (!mode) return;
  const stream = `${label} stream ${++streams}`;
  let events = 0;
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  (res as { write: (...args: unknown[]) => boolean }).write = (...args: unknown[]) => {
    const chunk = args[0];
    // The SDK writes each event as one chunk of `event:`/`id:`/`data:` lines (JSON answers have none).
    const text =
      typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString() : "";
    if (/^(?:event|id|data|retry):/m.test(text)) {
      const id = /^id: ?(.*)$/m.exec(text)?.[1];
      const data = /^data: ?(.*)$/m.exec(text)?.[1];
      if (data !== undefined) {
        events++;
        let summary = "";
        if (data.trim() === "") summary = "priming event (no data)";
        else
          try {
            const message = JSON.parse(data) as { method?: string; id?: unknown };
            summary = message.method ?? `response to ${JSON.stringify(message.id)}`;
          } catch {
            summary = "data that is not JSON";
          }
        const head = `${stream} event ${events}${id ? ` id=${id}` : ""} ${Buffer.byteLength(text)} bytes: ${summary}`;
        if (mode === "events") debugLine("sse", head);
        else if (events <= SSE_PEEK_EVENTS && data.trim() === "") debugLine("sse", head);
        else if (events <= SSE_PEEK_EVENTS) {
          let shown: unknown;
          try {
            shown = redact(JSON.parse(data));
          } catch {
            shown = redact(data);
          }
          debugLine("sse", `${head} ${JSON.stringify(shown)}`);
        }
      }
    }
    return write(...args);
  };
}
