import { createHash } from "node:crypto";
import type { TurnMessage } from "./turn.js";

/** JSON with object keys sorted, so the same value always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as object)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Tool-call arguments as the value they spell: clients re-serialize them with other spacing. */
function argumentsValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * A hash of the visible conversation, the way a client that sends no conversation header is matched to
 * its hidden transcript: the client sends the conversation so far, and the endpoint stored the hash of
 * what it had answered. Only what a client reliably sends back counts (roles, text, tool-call ids,
 * names and argument values); an empty assistant text equals none.
 */
export function conversationHash(messages: readonly TurnMessage[]): string {
  const hash = createHash("sha256");
  for (const message of messages) {
    const shape =
      message.role === "assistant"
        ? {
            role: "assistant",
            content: message.content || null,
            calls: (message.toolCalls ?? []).map((call) => [
              call.id,
              call.name,
              argumentsValue(call.arguments),
            ]),
          }
        : message.role === "tool"
          ? { role: "tool", id: message.toolCallId, content: message.content }
          : { role: message.role, content: message.content };
    hash.update(canonical(shape));
    hash.update("\n");
  }
  return hash.digest("base64url");
}
