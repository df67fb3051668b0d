import { createHash } from "node:crypto";
import { jsonDepth, MAX_ANSWER_DEPTH } from "./limits.js";
import type { TurnMessage } from "./turn.js";

/**
 * JSON with object keys sorted, so the same value always hashes the same. Written with a stack of its
 * own rather than by recursion: a client's tool-call arguments may nest hundreds of thousands deep,
 * and that must not overflow the call stack.
 */
function canonical(root: unknown): string {
  const out: string[] = [];
  /** What is left to write: a value, or a piece of text (a separator or a closing bracket). */
  const work: Array<{ value: unknown } | string> = [{ value: root }];
  while (work.length > 0) {
    const next = work.pop()!;
    if (typeof next === "string") {
      out.push(next);
      continue;
    }
    const { value } = next;
    if (Array.isArray(value)) {
      out.push("[");
      work.push("]");
      for (let index = value.length - 1; index >= 0; index--) {
        work.push({ value: value[index] });
        if (index > 0) work.push(",");
      }
    } else if (value !== null && typeof value === "object") {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .sort()
        .filter((key) => record[key] !== undefined);
      out.push("{");
      work.push("}");
      for (let index = keys.length - 1; index >= 0; index--) {
        const key = keys[index]!;
        work.push({ value: record[key] });
        work.push(`${index > 0 ? "," : ""}${JSON.stringify(key)}:`);
      }
    } else {
      out.push(JSON.stringify(value) ?? "null");
    }
  }
  return out.join("");
}

/** Tool-call arguments as the value they spell: clients re-serialize them with other spacing. */
function argumentsValue(text: string): unknown {
  // Nested deeper than any real arguments: the text as it is (parsing it would cost seconds).
  if (jsonDepth(text, MAX_ANSWER_DEPTH) > MAX_ANSWER_DEPTH) return text;
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
