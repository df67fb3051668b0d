import type { ResponseSink } from "./chat-completions-front.js";
import type { RelayedAnswer } from "./model-call-span.js";
import { retryHeaders, type UpstreamResponse } from "./upstream-transport.js";

/**
 * A passed-through answer written to the client as the upstream sent it: an event stream byte for
 * byte, a JSON body with its status. A body that is not JSON goes out as the front's own error shape
 * (`notJson`). `describe` reads what the answer says of itself (model, usage) for its span.
 */
export async function relayResponse(
  response: UpstreamResponse,
  sink: ResponseSink,
  notJson: (text: string) => unknown,
  describe: (parsed: unknown) => RelayedAnswer,
): Promise<RelayedAnswer> {
  const failed = response.status >= 400 ? { errorType: String(response.status) } : {};
  const type = response.headers.get("content-type") ?? "application/json";
  if (type.includes("text/event-stream")) {
    sink.startStream({ "content-type": type });
    const decoder = new TextDecoder();
    for await (const piece of response.body) {
      sink.write(decoder.decode(piece, { stream: true }));
      // The client takes what it was sent before more is read from the upstream (backpressure).
      if (sink.drained) await sink.drained();
    }
    sink.end();
    return failed;
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = notJson(text);
  }
  // When to try again is the client's to know too (an upstream's 429 or 503).
  sink.json(response.status, parsed, retryHeaders(response));
  return { ...describe(parsed), ...failed };
}
