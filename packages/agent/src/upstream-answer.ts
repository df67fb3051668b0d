import { AgentError } from "./agent-error.js";
import { checkToolCallCount, jsonDepth, MAX_ANSWER_DEPTH } from "./limits.js";
import type { ModelCallOptions, ModelReply, TurnToolCall } from "./turn.js";
import { type UpstreamResponse, type UpstreamTransport, upstreamMessage } from "./upstream-transport.js";

/**
 * One model call on an upstream, whatever format it speaks, and the reading of its answer that every
 * format shares: the body written and posted, the answer read whole or as its stream (a server that
 * ignores `stream: true` answers whole), JSON within the depth bound, tool calls checked.
 */

/** What a format contributes to a model call: its body, and how it reads a whole answer and a stream. */
export type UpstreamFormat = {
  body(stream: boolean): Record<string, unknown>;
  whole(text: string): ModelReply;
  stream(response: UpstreamResponse): Promise<ModelReply>;
};

/**
 * Posts one model call and reads its answer. A body that cannot be written is an internal error
 * (unless it is one of the loop's own errors, which says what the client sent wrong); a whole answer
 * to a streamed call still reaches the stream as one delta.
 */
export async function callUpstream(
  transport: UpstreamTransport,
  format: UpstreamFormat,
  options: ModelCallOptions,
): Promise<ModelReply> {
  const stream = options.onTextDelta !== undefined;
  let body: Record<string, unknown>;
  try {
    body = format.body(stream);
  } catch (error) {
    if (AgentError.is(error)) throw error;
    throw new AgentError("internal", (error as Error).message, { cause: error });
  }
  const response = await transport.post(body, options.signal, options.headers);
  if (!stream || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return wholeReply(format.whole(await transport.readText(response, options.signal)), options);
  }
  return format.stream(response);
}

/**
 * A reply that came whole: when the call asked for a stream (a server that ignores `stream: true`),
 * its text is reported as one delta, so a streaming client still gets it.
 */
export function wholeReply(reply: ModelReply, options: ModelCallOptions): ModelReply {
  if (reply.content) options.onTextDelta?.(reply.content);
  return reply;
}

/** A whole answer's JSON; one nested past MAX_ANSWER_DEPTH, or not JSON, is a malformed answer. */
export function answerJson(text: string, upstream: Pick<UpstreamTransport, "malformed">): unknown {
  if (jsonDepth(text, MAX_ANSWER_DEPTH) > MAX_ANSWER_DEPTH) {
    throw upstream.malformed(`an answer nested more than ${MAX_ANSWER_DEPTH} levels deep`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw upstream.malformed(`an answer that is not JSON (${text.slice(0, 80) || "empty"})`);
  }
}

/** One SSE event's JSON data; anything else is a malformed answer. */
export function eventJson(
  data: string,
  upstream: Pick<UpstreamTransport, "malformed">,
): Record<string, unknown> {
  try {
    return JSON.parse(data) as Record<string, unknown>;
  } catch {
    throw upstream.malformed(`an SSE event that is not JSON (${data.slice(0, 80)})`);
  }
}

/** The error an upstream's stream reports in an event (an `error` event, a failed response). */
export function streamFailed(event: unknown): AgentError {
  return new AgentError(
    "upstream_error",
    `The upstream model stream failed: ${upstreamMessage(JSON.stringify(event))}.`,
  );
}

/** Tool calls as the loop takes them; one without an id or a name is a malformed answer. */
export function checkedCalls(
  calls: Array<{ id: string; name: string; arguments: string }>,
  upstream: Pick<UpstreamTransport, "malformed" | "limits">,
): TurnToolCall[] {
  checkToolCallCount(calls.length, upstream.limits);
  for (const call of calls) {
    if (!call.id || !call.name) throw upstream.malformed("a tool call without an id or a name");
  }
  return calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments || "{}" }));
}
