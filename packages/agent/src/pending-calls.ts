import { AgentError } from "./agent-error.js";
import type { HandedOutCall } from "./conversation-store.js";
import type { WireApi } from "./finish-reasons.js";
import type { TurnMessage } from "./turn.js";

type ToolMessage = Extract<TurnMessage, { role: "tool" }>;

/** How each API's clients name tool calls and their results, for the errors below. */
const WORDS: Record<WireApi, { calls: string; result: string; where: string }> = {
  "chat-completions": {
    calls: "tool calls",
    result: 'a "tool" message',
    where: "right after that assistant message, before anything else",
  },
  messages: {
    calls: "tool_use blocks",
    result: "a tool_result block",
    where: "at the start of the user message that follows it, before any text",
  },
  responses: {
    calls: "function_call items",
    result: "a function_call_output item",
    where:
      "first in the next request's input (after previous_response_id, or after those items), before any message",
  },
};

/**
 * The error for a request that answers a hand-out with no result at all (a client that does not run
 * tools, or dropped the results): what it must send, and that the cell waiting for them was ended.
 */
export function unansweredCallsError(pending: readonly HandedOutCall[], api: WireApi): AgentError {
  const words = WORDS[api];
  const calls = pending.map((call) => `${call.visibleId} (${call.name})`).join(", ");
  return new AgentError(
    "invalid_request",
    `The last answer asked for ${words.calls} ${calls}, and this request holds no result for them. A client must run each call and send ${words.result} with its result, ${words.where}. The cell that waited for them has been ended and the model is told so: send your request again to go on without those results.`,
  );
}

/**
 * Matches the client's results (the tool messages leading `messages`) to the calls the endpoint
 * handed out. Every pending call needs its result, and only those: a result for anything else is
 * refused (it would go nowhere), and so is a result after the client's next words (the run waits for
 * the results first). What follows the results is the caller's.
 */
export function matchToolResults(
  pending: readonly HandedOutCall[],
  messages: readonly TurnMessage[],
  api: WireApi = "chat-completions",
): Map<string, ToolMessage> {
  const words = WORDS[api];
  const ids = new Set(pending.map((call) => call.visibleId));
  const results = new Map<string, ToolMessage>();
  const notPending: string[] = [];
  let leading = true;
  for (const message of messages) {
    if (message.role !== "tool") {
      leading = false;
      continue;
    }
    if (!leading) {
      throw new AgentError(
        "invalid_request",
        `The last answer asked for ${words.calls} (${[...ids].join(", ")}); send ${words.result} with the result of each, ${words.where}.`,
      );
    }
    if (!ids.has(message.toolCallId) || results.has(message.toolCallId)) notPending.push(message.toolCallId);
    else results.set(message.toolCallId, message);
  }
  if (notPending.length > 0) {
    throw new AgentError(
      "conflict",
      `Tool results for calls that are not pending: ${notPending.join(", ")}. Pending are ${[...ids].join(", ")}; send each result once.`,
    );
  }
  const missing = pending.filter((call) => !results.has(call.visibleId));
  if (missing.length > 0) {
    throw new AgentError(
      "invalid_request",
      `Results are missing for ${words.calls} ${missing.map((call) => `${call.visibleId} (${call.name})`).join(", ")}: send ${words.result} for every one of the last answer.`,
    );
  }
  return results;
}

/**
 * A conversation the endpoint has no transcript of (a client that started elsewhere, or whose
 * transcript expired) may hold tool calls of its own tools; the upstream model was never offered
 * those, so they go to it as text: what was called, and what it returned.
 */
export function flattenForeignToolHistory(messages: readonly TurnMessage[]): TurnMessage[] {
  return messages.map((message): TurnMessage => {
    if (message.role === "assistant" && message.toolCalls?.length) {
      const calls = message.toolCalls.map((call) => `[called ${call.name}(${call.arguments}) as ${call.id}]`);
      return { role: "assistant", content: [message.content ?? "", ...calls].filter(Boolean).join("\n") };
    }
    if (message.role === "tool") {
      return {
        role: "user",
        content: `[${message.isError ? "error" : "result"} of ${message.toolCallId}: ${message.content}]`,
      };
    }
    return message;
  });
}
