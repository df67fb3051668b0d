/**
 * Why a model stopped, in the loop's own words, and what each API calls it: one table, one row per
 * reason, one column per API the endpoint speaks (as a front to clients or to an upstream model). The
 * first word of a cell is what the endpoint writes in that API; the others are words it reads as the
 * same reason. An API joins by adding its column to every row (`WireApi` then makes the compiler ask).
 */

/** The APIs of the table's columns. */
export type WireApi = "chat-completions" | "messages" | "responses";

export type FinishReason =
  /** The model ended its turn. */
  | "stop"
  /** One of the request's stop sequences ended the answer. */
  | "stop_sequence"
  /** The answer hit the request's output token limit: it is cut off. */
  | "length"
  /** The answer hit the model's context window: it is cut off. */
  | "context_window"
  /** The provider's content filter stopped the answer, or the model refused. */
  | "content_filter"
  /** The answer asks for tool calls (the client's own, when the endpoint hands them out). */
  | "tool_calls";

export const FINISH_REASONS: Readonly<Record<FinishReason, Readonly<Record<WireApi, readonly string[]>>>> = {
  stop: { "chat-completions": ["stop"], messages: ["end_turn"], responses: ["completed"] },
  // Chat Completions reports a stop sequence as "stop", and a Responses response as completed: both
  // read back as the plain stop above.
  stop_sequence: { "chat-completions": ["stop"], messages: ["stop_sequence"], responses: ["completed"] },
  length: { "chat-completions": ["length"], messages: ["max_tokens"], responses: ["max_output_tokens"] },
  // The Responses API names no context window reason: the answer is cut off as by its token limit.
  context_window: {
    "chat-completions": ["length"],
    messages: ["model_context_window_exceeded"],
    responses: ["max_output_tokens"],
  },
  content_filter: {
    "chat-completions": ["content_filter", "refusal"],
    messages: ["refusal"],
    responses: ["content_filter"],
  },
  // A response that hands calls out is completed; its function_call items say the rest.
  tool_calls: {
    "chat-completions": ["tool_calls", "function_call"],
    messages: ["tool_use"],
    responses: ["completed"],
  },
};

const ROWS = Object.entries(FINISH_REASONS) as Array<[FinishReason, Record<WireApi, readonly string[]>]>;

/** A reason as `api` writes it. */
export function toWireFinish(api: WireApi, reason: FinishReason): string {
  return FINISH_REASONS[reason][api][0]!;
}

/**
 * An API's word as the loop's reason: the first row that lists it. A word no row lists (a reason an
 * API added later) reads as a plain stop, the one answer every client understands.
 */
export function fromWireFinish(api: WireApi, word: unknown): FinishReason {
  for (const [reason, words] of ROWS)
    if (typeof word === "string" && words[api].includes(word)) return reason;
  return "stop";
}
