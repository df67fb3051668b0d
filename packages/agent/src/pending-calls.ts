import { AgentError } from "./agent-error.js";
import type { HandedOutCall } from "./conversation-store.js";
import type { TurnMessage } from "./turn.js";

type ToolMessage = Extract<TurnMessage, { role: "tool" }>;

/**
 * Matches the client's `tool` messages to the calls the endpoint handed out. Every pending call needs
 * its result, and only those: a result for anything else is refused (it would go nowhere), and so is
 * a new message before the results are in (the run waits for them).
 */
export function matchToolResults(
  pending: readonly HandedOutCall[],
  messages: readonly TurnMessage[],
): Map<string, ToolMessage> {
  const ids = new Set(pending.map((call) => call.visibleId));
  const results = new Map<string, ToolMessage>();
  const notPending: string[] = [];
  for (const message of messages) {
    if (message.role !== "tool") {
      throw new AgentError(
        "invalid_request",
        `The last answer asked for tool calls (${[...ids].join(", ")}); send one "tool" message with the result of each, right after that assistant message, before anything else.`,
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
      `Results are missing for tool calls ${missing.map((call) => `${call.visibleId} (${call.name})`).join(", ")}: send a "tool" message for every tool call of the last answer.`,
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
