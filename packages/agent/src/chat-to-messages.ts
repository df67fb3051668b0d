import { AgentError } from "./agent-error.js";

/**
 * A Chat Completions request's parameters in the Messages API's terms, for a Chat Completions client
 * served by a Messages upstream: the ones with a counterpart there mapped, the ones that change nothing
 * dropped, and the rest refused with what to do (sent on, they would fail upstream or mean something else).
 */
export function chatParamsForMessages(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const mapped: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    switch (key) {
      case "max_tokens":
      case "max_completion_tokens":
        mapped.max_tokens = value;
        break;
      case "temperature":
      case "top_p":
        mapped[key] = value;
        break;
      case "stop":
        mapped.stop_sequences = Array.isArray(value) ? value : [value];
        break;
      case "user":
        mapped.metadata = { user_id: value };
        break;
      // Their defaults: nothing to send.
      case "n":
        if (value !== 1) throw refused(key, "code mode answers one choice: leave out n, or set it to 1");
        break;
      case "logprobs":
        if (value !== false) throw refused(key, "the Messages API returns no log probabilities");
        break;
      case "store":
      case "parallel_tool_calls":
        break;
      default:
        throw refused(key, "leave it out");
    }
  }
  return mapped;
}

function refused(key: string, what: string): AgentError {
  return new AgentError(
    "invalid_request",
    `"${key}" has no counterpart in the Messages API, which this gateway's upstream speaks (agent.upstream.api): ${what}.`,
  );
}

/** A Chat Completions `tool_choice` (and `parallel_tool_calls`) as a Messages `tool_choice`. */
export function chatToolChoiceForMessages(choice: unknown, parallel: unknown): Record<string, unknown> {
  const serial = parallel === false ? { disable_parallel_tool_use: true } : {};
  if (choice === undefined || choice === "auto") {
    return parallel === false ? { tool_choice: { type: "auto", ...serial } } : {};
  }
  if (choice === "required") return { tool_choice: { type: "any", ...serial } };
  if (choice === "none") return { tool_choice: { type: "none" } };
  const name = (choice as { function?: { name?: unknown } } | null)?.function?.name;
  if (typeof name === "string") return { tool_choice: { type: "tool", name, ...serial } };
  throw new AgentError(
    "invalid_request",
    '"tool_choice" must be "auto", "required", "none" or { type: "function", function: { name } }.',
  );
}
