import { AgentError } from "./agent-error.js";
import type { UpstreamApi } from "./anthropic-messages.js";
import { chatParamsForMessages } from "./chat-to-messages.js";

/** Fields of a Responses request the front reads itself. */
export const RESPONSES_LOOP_FIELDS = new Set([
  "model",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "store",
  "previous_response_id",
  "include",
  "metadata",
  "stream",
  "stream_options",
]);

/**
 * Fields that change nothing this endpoint does, so they are accepted and not sent on: how the
 * hosted API truncates, caches or bills, and data about the client. Clients send them by default.
 */
const IGNORED = new Set([
  "truncation",
  "prompt_cache_retention",
  "prompt_cache_options",
  "client_metadata",
  "max_tool_calls",
  "top_logprobs",
]);

function refused(key: string, what: string): AgentError {
  return new AgentError("invalid_request", `"${key}" ${what}.`);
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

/** `text.format` as a Chat Completions `response_format` (nothing for plain text). */
function responseFormat(text: unknown): Record<string, unknown> {
  const format = record(record(text).format);
  switch (format.type) {
    case undefined:
    case "text":
      return {};
    case "json_object":
      return { response_format: { type: "json_object" } };
    case "json_schema":
      return {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: format.name,
            schema: format.schema,
            ...(format.strict !== undefined ? { strict: format.strict } : {}),
            ...(format.description !== undefined ? { description: format.description } : {}),
          },
        },
      };
    default:
      throw refused(
        "text.format",
        `of type ${JSON.stringify(format.type)} is not known: use text, json_object or json_schema`,
      );
  }
}

/**
 * A Responses request's other parameters in the upstream's terms: mapped to Chat Completions
 * (`max_output_tokens` → `max_completion_tokens`, `text.format` → `response_format`,
 * `reasoning.effort` → `reasoning_effort`), then to the Messages API for such an upstream. Fields
 * with no effect here are dropped; the server-side features this endpoint does not have
 * (`conversation`, `prompt`, `background`) and unknown fields are refused by name.
 */
export function responsesParams(request: Record<string, unknown>, api: UpstreamApi): Record<string, unknown> {
  const chat: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    if (RESPONSES_LOOP_FIELDS.has(key) || IGNORED.has(key) || value === undefined || value === null) continue;
    switch (key) {
      case "temperature":
      case "top_p":
        chat[key] = value;
        break;
      case "max_output_tokens":
        chat.max_completion_tokens = value;
        break;
      case "user":
      case "safety_identifier":
        chat.user = value;
        break;
      case "text":
        // verbosity is a hint without a counterpart upstream: dropped.
        Object.assign(chat, responseFormat(value));
        break;
      case "reasoning": {
        const effort = record(value).effort;
        // A Messages upstream has no effort setting; its own thinking is configured there.
        if (typeof effort === "string" && api === "chat-completions") chat.reasoning_effort = effort;
        break;
      }
      case "service_tier":
      case "prompt_cache_key":
        if (api === "chat-completions") chat[key] = value;
        break;
      case "background":
        if (value !== false)
          throw refused(key, "is not served here: responses are answered in the request; leave it out");
        break;
      case "conversation":
      case "prompt":
        throw refused(
          key,
          key === "conversation"
            ? "(a stored conversation object) is not served here: send previous_response_id, or the whole input"
            : "(a stored prompt template) is not served here: send instructions and input instead",
        );
      default:
        throw refused(
          key,
          "is not a Responses parameter this endpoint can carry to its upstream: leave it out",
        );
    }
  }
  return api === "messages" ? chatParamsForMessages(chat) : chat;
}
