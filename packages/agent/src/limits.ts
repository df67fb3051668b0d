import { AgentError } from "./agent-error.js";

/**
 * The bounds on what one upstream answer can make the endpoint hold or do. An answer past one of them
 * is the upstream's failure (502 in the front's error shape, naming the limit), never the client's.
 */
export type UpstreamLimits = {
  /** Bytes of one whole answer body, streamed or not. */
  maxAnswerBytes: number;
  /** Bytes of one SSE line, and of one event's data lines together. */
  maxSseEventBytes: number;
  /** Tool calls in one model answer; a streamed call's `index` must be below it. */
  maxToolCallsPerAnswer: number;
};

/** The bounds on one client request, checked before any of it reaches the loop. */
export type RequestLimits = {
  /** Bytes of the request body. */
  maxBodyBytes: number;
  /** Nesting of arrays and objects in the request body. */
  maxJsonDepth: number;
  /** Entries of the request's `tools`. */
  maxClientTools: number;
  /** Cells (`exec` calls) the model may run for one request, over all its model calls. */
  maxCellsPerRequest: number;
};

export type AgentLimits = UpstreamLimits & RequestLimits;

const MIB = 1024 * 1024;

/**
 * The defaults. A streamed answer spends about 150 bytes of framing per token, so 32 MiB holds a
 * long answer many times over; 64 tool calls is far past what models make in parallel; 128 tools is
 * the Chat Completions API's own limit.
 */
export const DEFAULT_LIMITS: AgentLimits = {
  maxAnswerBytes: 32 * MIB,
  maxSseEventBytes: 4 * MIB,
  maxToolCallsPerAnswer: 64,
  maxBodyBytes: 8 * MIB,
  maxJsonDepth: 64,
  maxClientTools: 128,
  maxCellsPerRequest: 64,
};

/**
 * How deeply a whole (not streamed) upstream answer may nest: far past any real answer, and shallow
 * enough that turning its values back into JSON cannot overflow the stack.
 */
export const MAX_ANSWER_DEPTH = 512;

/**
 * An upstream answer past one of the limits. `setting` is the name an operator raises (the gateway's
 * `agent.limits.<name>`), so the message says what to change.
 */
export function upstreamLimitError(
  what: string,
  setting: keyof UpstreamLimits | "maxCellsPerRequest",
  limit: number,
): AgentError {
  return new AgentError(
    "upstream_malformed",
    `The upstream model's answer was refused: ${what}, over the limit of ${limit} (${setting}). Send the request again; if it keeps happening, the model or the server in front of it misbehaves, or the limit (agent.limits.${setting}) is too low for it.`,
  );
}

/**
 * The index of a streamed tool call, accepted only as a small integer: a huge one would make the
 * reader hold (or walk) a huge sparse array.
 */
export function toolCallIndex(index: unknown, next: number, limits: UpstreamLimits): number {
  if (index === undefined || index === null) index = next;
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0) {
    throw new AgentError(
      "upstream_malformed",
      `The upstream model sent a tool call whose index is ${JSON.stringify(index)}, not a small non-negative integer.`,
    );
  }
  if (index >= limits.maxToolCallsPerAnswer) {
    throw upstreamLimitError(
      `a tool call at index ${index}`,
      "maxToolCallsPerAnswer",
      limits.maxToolCallsPerAnswer,
    );
  }
  return index;
}

/** Refuses an answer with more tool calls than the limit. */
export function checkToolCallCount(count: number, limits: UpstreamLimits): void {
  if (count > limits.maxToolCallsPerAnswer) {
    throw upstreamLimitError(
      `${count} tool calls in one answer`,
      "maxToolCallsPerAnswer",
      limits.maxToolCallsPerAnswer,
    );
  }
}

/**
 * How deeply arrays and objects nest in a JSON text, scanned once, left to right, without recursion;
 * stops as soon as the depth passes `max` (the answer is then `max + 1`). Brackets inside strings do not
 * count.
 */
export function jsonDepth(text: string, max: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (inString) {
      if (code === 0x5c)
        at++; // A backslash escapes the next character (a quote or a backslash).
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x5b || code === 0x7b) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > max) return deepest;
      }
    } else if (code === 0x5d || code === 0x7d) depth--;
  }
  return deepest;
}

/**
 * The client-side bounds of a parsed request body: its `tools` (where the Chat Completions and
 * Messages APIs keep all of them; the Responses front counts the rest, see checkClientToolCount).
 * Throws the client's error that says what to change.
 */
export function checkClientTools(body: unknown, limits: Pick<RequestLimits, "maxClientTools">): void {
  const tools = (body as { tools?: unknown } | null)?.tools;
  if (Array.isArray(tools)) checkClientToolCount(tools.length, limits);
}

/** The number of client tools a request offers, wherever it carried them, within the limit. */
export function checkClientToolCount(count: number, limits: Pick<RequestLimits, "maxClientTools">): void {
  if (count > limits.maxClientTools) {
    throw new AgentError(
      "invalid_request",
      `The request offers ${count} tools; this endpoint takes at most ${limits.maxClientTools} (agent.limits.maxClientTools). Send fewer tools.`,
    );
  }
}
