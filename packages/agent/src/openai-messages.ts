import { imageDataUrl, type TurnMessage, type TurnToolCall, type TurnUsage } from "./turn.js";

/**
 * The Chat Completions message shapes the loop reads and writes (the fields it needs; anything else a
 * client sends on a message is not carried into the hidden transcript).
 */
export type OpenAiToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
};

export type OpenAiMessage =
  | { role: "system" | "developer"; content: string | unknown[] }
  | { role: "user"; content: string | unknown[] }
  | { role: "assistant"; content: string | null; tool_calls?: OpenAiToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

export type OpenAiUsage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

export function toOpenAiToolCall(call: TurnToolCall): OpenAiToolCall {
  return { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } };
}

/**
 * The loop's messages as a Chat Completions `messages` array. A tool message holds text only in this
 * API, so the images a cell showed follow the run of tool messages they belong to as one `user`
 * message of `image_url` parts (data URLs), each led by a text part naming the call it came from; the
 * run is not split, as every tool result must directly follow the assistant message that called.
 */
export function toOpenAiMessages(messages: readonly TurnMessage[]): OpenAiMessage[] {
  const wire: OpenAiMessage[] = [];
  let images: unknown[] = [];
  const flushImages = () => {
    if (images.length) wire.push({ role: "user", content: images });
    images = [];
  };
  for (const message of messages) {
    if (message.role !== "tool") flushImages();
    switch (message.role) {
      case "system":
      case "user":
        wire.push({ role: message.role, content: message.content as string | unknown[] });
        break;
      case "assistant":
        wire.push({
          role: "assistant",
          content: message.content,
          ...(message.toolCalls?.length ? { tool_calls: message.toolCalls.map(toOpenAiToolCall) } : {}),
        });
        break;
      default:
        wire.push({ role: "tool", tool_call_id: message.toolCallId, content: message.content });
        if (message.images?.length) {
          images.push(
            { type: "text", text: toolImagesCaption(message.toolCallId, message.images.length) },
            ...message.images.map((image) => ({
              type: "image_url",
              image_url: { url: imageDataUrl(image) },
            })),
          );
        }
    }
  }
  flushImages();
  return wire;
}

/** The text before a tool call's images in the `user` message that carries them. */
function toolImagesCaption(toolCallId: string, count: number): string {
  return `[${count === 1 ? "the image" : `the ${count} images`} shown by the cell of tool call ${toolCallId}, in the order of its output]`;
}

export function fromOpenAiUsage(usage: unknown): TurnUsage | null {
  if (typeof usage !== "object" || usage === null) return null;
  const { prompt_tokens, completion_tokens, total_tokens } = usage as Record<string, unknown>;
  const count = (value: unknown) => (typeof value === "number" && Number.isFinite(value) ? value : 0);
  return {
    promptTokens: count(prompt_tokens),
    completionTokens: count(completion_tokens),
    totalTokens: count(total_tokens) || count(prompt_tokens) + count(completion_tokens),
  };
}

export function toOpenAiUsage(usage: TurnUsage): OpenAiUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.totalTokens,
  };
}

/** Text of a content value: a string, or the text parts of a parts array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) =>
      typeof part === "object" && part !== null && (part as { type?: unknown }).type === "text"
        ? String((part as { text?: unknown }).text ?? "")
        : "",
    )
    .join("");
}

/**
 * A client's tool result counts as a failure (a catchable error in the cell) when its content is a
 * JSON object whose only key is `error`, such as `{"error": "no such file"}`.
 */
export function toolFailure(content: string): string | null {
  try {
    const parsed = JSON.parse(content) as unknown;
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      const keys = Object.keys(parsed);
      if (keys.length === 1 && keys[0] === "error") {
        const error = (parsed as { error: unknown }).error;
        return typeof error === "string" ? error : JSON.stringify(error);
      }
    }
  } catch {
    // Not JSON: a plain result, not a failure.
  }
  return null;
}
