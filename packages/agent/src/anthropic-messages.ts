import { AgentError, type AgentErrorKind } from "./agent-error.js";
import type { TurnMessage, TurnTool, TurnToolCall, TurnUsage } from "./turn.js";

/**
 * The Anthropic Messages API's shapes as the loop reads and writes them: a Messages request's system
 * prompt, messages and tools in the loop's terms, and the loop's answer back as content blocks. Tool
 * calls are `tool_use` blocks of an assistant message and results `tool_result` blocks of a user
 * message; here each block is one loop message, in order.
 */
export type MessagesContentBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: unknown };

export type MessagesUsage = { input_tokens: number; output_tokens: number };

/** Which wire format a model upstream speaks: content parts are written for it. */
export type UpstreamApi = "chat-completions" | "messages";

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

/** The text of a `system` value: a string, or text blocks (their cache hints dropped). */
export function systemText(system: unknown): string {
  if (typeof system === "string") return system;
  if (!Array.isArray(system)) throw invalid('"system" must be a string or an array of text blocks.');
  return systemTextAt(system, "system");
}

function systemTextAt(blocks: readonly unknown[], where: string): string {
  return blocks
    .map((block, index) => {
      const fields = record(block);
      if (fields.type !== "text" || typeof fields.text !== "string")
        throw invalid(`${where}[${index}] must be a text block { type: "text", text }.`);
      return fields.text;
    })
    .join("\n\n");
}

/**
 * An image block for the upstream: as it is for a Messages upstream, as an `image_url` part for Chat
 * Completions (a data URL for base64 sources). Anything else cannot be written there and is refused.
 */
function imagePart(block: Record<string, unknown>, where: string, api: UpstreamApi): unknown {
  if (api === "messages") return block;
  const source = record(block.source);
  if (source.type === "base64" && typeof source.media_type === "string" && typeof source.data === "string") {
    return { type: "image_url", image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  }
  if (source.type === "url" && typeof source.url === "string") {
    return { type: "image_url", image_url: { url: source.url } };
  }
  throw invalid(
    `${where}: an image with source type ${JSON.stringify(source.type)} cannot be sent to a Chat Completions upstream; use a base64 or url source.`,
  );
}

/** A tool result's content as text: a string, or text blocks (an image there cannot be carried). */
function toolResultText(content: unknown, where: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of text blocks.`);
  return content
    .map((block, index) => {
      const fields = record(block);
      if (fields.type !== "text" || typeof fields.text !== "string") {
        throw invalid(
          `${where}.content[${index}] is a ${JSON.stringify(fields.type)} block; code mode hands tool results to the cell as text, so send text blocks only.`,
        );
      }
      return fields.text;
    })
    .join("");
}

/** One Messages message as loop messages: tool results first (each its own), then the rest. */
function toTurnMessages(message: unknown, index: number, api: UpstreamApi): TurnMessage[] {
  const fields = record(message);
  const where = `messages[${index}]`;
  const { role, content } = fields;
  if (role === "system") {
    // A system message among the others (Claude Code sends its environment so): as text, so the same
    // words hash the same whether the client sends them as blocks with cache hints or as a string.
    if (typeof content !== "string" && !Array.isArray(content))
      throw invalid(`${where}.content must be a string or an array of text blocks.`);
    const text = typeof content === "string" ? content : systemTextAt(content, `${where}.content`);
    return text ? [{ role: "system", content: text, inline: true }] : [];
  }
  if (role !== "user" && role !== "assistant")
    throw invalid(
      `${where} has role ${JSON.stringify(role)}; the Messages API has user, assistant and system.`,
    );
  if (typeof content === "string") return [{ role, content }];
  if (!Array.isArray(content))
    throw invalid(`${where}.content must be a string or an array of content blocks.`);
  if (role === "assistant") {
    const text: string[] = [];
    const toolCalls: TurnToolCall[] = [];
    content.forEach((block, blockIndex) => {
      const part = record(block);
      const at = `${where}.content[${blockIndex}]`;
      if (part.type === "text" && typeof part.text === "string") text.push(part.text);
      else if (part.type === "tool_use") {
        if (typeof part.id !== "string" || typeof part.name !== "string")
          throw invalid(`${at}: a tool_use block needs an id and a name.`);
        toolCalls.push({ id: part.id, name: part.name, arguments: JSON.stringify(part.input ?? {}) });
      } else if (part.type !== "thinking" && part.type !== "redacted_thinking") {
        throw invalid(
          `${at} is a ${JSON.stringify(part.type)} block; an assistant message here holds text and tool_use blocks.`,
        );
      }
    });
    return [
      { role: "assistant", content: text.join("") || null, ...(toolCalls.length ? { toolCalls } : {}) },
    ];
  }
  const results: TurnMessage[] = [];
  const parts: unknown[] = [];
  content.forEach((block, blockIndex) => {
    const part = record(block);
    const at = `${where}.content[${blockIndex}]`;
    if (part.type === "tool_result") {
      if (typeof part.tool_use_id !== "string")
        throw invalid(`${at}: a tool_result block needs tool_use_id.`);
      results.push({
        role: "tool",
        toolCallId: part.tool_use_id,
        content: toolResultText(part.content, at),
        ...(part.is_error === true ? { isError: true } : {}),
      });
    } else if (part.type === "text" && typeof part.text === "string") {
      parts.push(api === "messages" ? part : { type: "text", text: part.text });
    } else if (part.type === "image") {
      parts.push(imagePart(part, at, api));
    } else {
      throw invalid(
        `${at} is a ${JSON.stringify(part.type)} block; a user message here holds text, image and tool_result blocks.`,
      );
    }
  });
  if (parts.length === 0) return results;
  // Text alone reads as a string, so the same words hash the same whichever way the client wrote them.
  const onlyText = parts.every((part) => (part as { type?: unknown }).type === "text");
  const user: TurnMessage = {
    role: "user",
    content: onlyText ? parts.map((part) => (part as { text: string }).text).join("") : parts,
  };
  return [...results, user];
}

/** A Messages request's system prompt and messages as the loop's messages. */
export function fromMessagesRequest(request: Record<string, unknown>, api: UpstreamApi): TurnMessage[] {
  if (!Array.isArray(request.messages) || request.messages.length === 0)
    throw invalid('"messages" must be a non-empty array of Messages API messages.');
  const messages: TurnMessage[] = [];
  if (request.system !== undefined) {
    const text = systemText(request.system);
    if (text) messages.push({ role: "system", content: text });
  }
  request.messages.forEach((message, index) => {
    messages.push(...toTurnMessages(message, index, api));
  });
  return messages;
}

/** A Messages request's `tools` as the loop's tools; server tools (web search, ...) are refused. */
export function fromMessagesTools(tools: unknown): TurnTool[] {
  if (!Array.isArray(tools))
    throw invalid('"tools" must be an array of { name, description, input_schema }.');
  const names = new Set<string>();
  return tools.map((tool, index) => {
    const fields = record(tool);
    if (fields.type !== undefined && fields.type !== "custom") {
      throw invalid(
        `tools[${index}] is a ${JSON.stringify(fields.type)} tool, which code mode cannot run: give client tools as { name, description, input_schema }.`,
      );
    }
    if (typeof fields.name !== "string" || !fields.name)
      throw invalid(`tools[${index}] needs a name: { name, description, input_schema }.`);
    if (names.has(fields.name)) throw invalid(`tools[${index}]: the name "${fields.name}" is given twice.`);
    names.add(fields.name);
    return {
      name: fields.name,
      description: typeof fields.description === "string" ? fields.description : "",
      parameters: fields.input_schema ?? { type: "object", properties: {} },
    };
  });
}

/** A tool call's JSON arguments as a tool_use block's input (an object, as the API promises). */
export function toolUseInput(argumentsText: string): unknown {
  try {
    const value = JSON.parse(argumentsText) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : { value };
  } catch {
    return {};
  }
}

/** The loop's answer as Messages content blocks: its text, then one tool_use block per call. */
export function toMessagesContent(
  content: string | null,
  toolCalls: readonly TurnToolCall[],
): MessagesContentBlock[] {
  return [
    ...(content ? [{ type: "text" as const, text: content }] : []),
    ...toolCalls.map((call) => ({
      type: "tool_use" as const,
      id: call.id,
      name: call.name,
      input: toolUseInput(call.arguments),
    })),
  ];
}

export function toMessagesUsage(usage: TurnUsage): MessagesUsage {
  return { input_tokens: usage.promptTokens, output_tokens: usage.completionTokens };
}

export function fromMessagesUsage(usage: unknown): TurnUsage | null {
  if (typeof usage !== "object" || usage === null) return null;
  const fields = usage as Record<string, unknown>;
  const count = (value: unknown) => (typeof value === "number" && Number.isFinite(value) ? value : 0);
  // Cached input is input too: the Messages API counts it apart from input_tokens.
  const input =
    count(fields.input_tokens) +
    count(fields.cache_creation_input_tokens) +
    count(fields.cache_read_input_tokens);
  const output = count(fields.output_tokens);
  return { promptTokens: input, completionTokens: output, totalTokens: input + output };
}

const ERROR_TYPES: Record<AgentErrorKind, string> = {
  invalid_request: "invalid_request_error",
  not_found: "not_found_error",
  conflict: "invalid_request_error",
  upstream_error: "api_error",
  upstream_unavailable: "api_error",
  upstream_malformed: "api_error",
  turn_limit: "invalid_request_error",
  aborted: "invalid_request_error",
  internal: "api_error",
};

/** The Messages API's error type for a status the upstream answered (its own 4xx). */
function typeOfStatus(status: number): string | null {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 529:
      return "overloaded_error";
    default:
      return null;
  }
}

/**
 * An error as the Messages API shapes it, so Anthropic's clients raise their usual error types;
 * `status` is the HTTP status it goes out with when the host sets its own (a 401, a 404).
 */
export function messagesErrorBody(error: AgentError, status: number = error.status): unknown {
  const type = typeOfStatus(status) ?? ERROR_TYPES[error.kind];
  return {
    type: "error",
    error: { type, message: error.message, ...(error.details ? { details: error.details } : {}) },
  };
}
