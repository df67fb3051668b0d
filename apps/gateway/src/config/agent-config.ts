// biome-ignore-all lint/suspicious/noTemplateCurlyInString: hints show ${ENV} references as users write them
// The limits' own entry: the package's index would bring its upstream transport, and with it Node's HTTP
// stack, into every start, even over stdio.
import { type AgentLimits, DEFAULT_LIMITS } from "@codecell/agent/limits";
import { z } from "zod";
import type { ConfigProblem } from "./config-problem.js";

/**
 * The `agent` section: where `POST /v1/chat/completions`, `/v1/messages` and `/v1/responses` send their model
 * calls, in which API, and the bounds of the loop. Parsed here, on its own, so the config loader only
 * hooks it in.
 */
export type AgentSettings = {
  upstream: {
    /** The API the upstream speaks: OpenAI Chat Completions, Anthropic's Messages API, or OpenAI's Responses API. */
    api: "chat-completions" | "messages" | "responses";
    baseUrl: string;
    apiKey?: string;
    /** The model for requests that name none. */
    model?: string;
    timeoutMs: number;
    headers: Record<string, string>;
    /** `max_tokens` of a request to a Messages upstream that sets none (that API requires one). */
    maxTokens: number;
    /** Name the upstream's address in the errors clients get (off: only operators see it). */
    showAddressInErrors: boolean;
    /** A Responses upstream is offered exec as a custom tool whose input is the cell (no JSON escaping). */
    execAsCustomTool: boolean;
  };
  maxModelTurns: number;
  transcriptTtlSeconds: number;
  /** What one request and one upstream answer may make the endpoint hold or do. */
  limits: AgentLimits;
  /**
   * Hosted tools of a Responses request (web_search, local_shell, ...), which no cell can run: left
   * out of the run with the `codecell-dropped-tools` header ("drop"), or refused with a 400 ("refuse").
   */
  hostedTools: "drop" | "refuse";
};

export const DEFAULT_AGENT_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_MODEL_TURNS = 16;
export const DEFAULT_TRANSCRIPT_TTL_SECONDS = 3_600;
export const DEFAULT_UPSTREAM_MAX_TOKENS = 4_096;

export const agentConfigSchema = () =>
  z.strictObject({
    upstream: z.strictObject({
      api: z.enum(["chat-completions", "messages", "responses"]).optional(),
      baseUrl: z.url({ protocol: /^https?$/ }),
      apiKey: z.string().optional(),
      model: z.string().min(1).optional(),
      timeoutMs: z.number().int().min(100).max(3_600_000).optional(),
      headers: z.record(z.string(), z.string()).optional(),
      maxTokens: z.number().int().min(1).max(1_000_000).optional(),
      showAddressInErrors: z.boolean().optional(),
      execAsCustomTool: z.boolean().optional(),
    }),
    limits: z
      .strictObject({
        maxAnswerBytes: z
          .number()
          .int()
          .min(1024)
          .max(1024 * 1024 * 1024)
          .optional(),
        maxSseEventBytes: z
          .number()
          .int()
          .min(1024)
          .max(1024 * 1024 * 1024)
          .optional(),
        maxToolCallsPerAnswer: z.number().int().min(1).max(10_000).optional(),
        maxCellsPerRequest: z.number().int().min(1).max(100_000).optional(),
        maxClientTools: z.number().int().min(0).max(100_000).optional(),
        maxBodyBytes: z
          .number()
          .int()
          .min(1024)
          .max(1024 * 1024 * 1024)
          .optional(),
        maxJsonDepth: z.number().int().min(2).max(10_000).optional(),
      })
      .optional(),
    maxModelTurns: z.number().int().min(1).max(1000).optional(),
    transcriptTtlSeconds: z
      .number()
      .int()
      .min(1)
      .max(30 * 24 * 3600)
      .optional(),
    hostedTools: z.enum(["drop", "refuse"]).optional(),
  });

export const AGENT_FIELD_HINTS: Record<string, string> = {
  agent:
    'an object such as { "upstream": { "baseUrl": "https://api.openai.com/v1", "apiKey": "${OPENAI_API_KEY}" } }',
  "agent.upstream": '{ "baseUrl": "https://.../v1", "apiKey": "${OPENAI_API_KEY}", "model": "gpt-4.1" }',
  "agent.upstream.api":
    '"chat-completions" (default: an OpenAI-compatible server), "messages" (the Anthropic Messages API) or "responses" (OpenAI\'s Responses API)',
  "agent.upstream.baseUrl":
    'the API root of the upstream, such as "https://api.openai.com/v1" or, with api "messages", "https://api.anthropic.com/v1"',
  "agent.upstream.apiKey": 'the upstream\'s API key, best from the environment: "${OPENAI_API_KEY}"',
  "agent.upstream.model": "the model for requests that name none",
  "agent.upstream.timeoutMs": `milliseconds (100 to 3600000, default ${DEFAULT_AGENT_TIMEOUT_MS}) one upstream request may take`,
  "agent.upstream.headers": "an object of header names to string values sent with every upstream request",
  "agent.upstream.maxTokens": `max_tokens (1 to 1000000, default ${DEFAULT_UPSTREAM_MAX_TOKENS}) sent to a Messages upstream when a request sets none`,
  "agent.upstream.showAddressInErrors":
    "true to name the upstream's address in the errors clients get (default false: only the debug lines show it)",
  "agent.upstream.execAsCustomTool":
    'true to offer a Responses upstream (api "responses") exec as a custom tool whose input is the cell itself, so the model writes code without JSON escaping (default false)',
  "agent.limits":
    "an object of bounds on one request and one upstream answer: maxAnswerBytes, maxSseEventBytes, maxToolCallsPerAnswer, maxCellsPerRequest, maxClientTools, maxBodyBytes, maxJsonDepth",
  "agent.limits.maxAnswerBytes": `bytes of one upstream answer, streamed or not (1024 to 1 GiB, default ${DEFAULT_LIMITS.maxAnswerBytes})`,
  "agent.limits.maxSseEventBytes": `bytes of one line or event of an upstream event stream (1024 to 1 GiB, default ${DEFAULT_LIMITS.maxSseEventBytes})`,
  "agent.limits.maxToolCallsPerAnswer": `tool calls in one upstream answer (1 to 10000, default ${DEFAULT_LIMITS.maxToolCallsPerAnswer})`,
  "agent.limits.maxCellsPerRequest": `cells (exec calls) the model may run for one request (1 to 100000, default ${DEFAULT_LIMITS.maxCellsPerRequest})`,
  "agent.limits.maxClientTools": `tools one request may offer (0 to 100000, default ${DEFAULT_LIMITS.maxClientTools})`,
  "agent.limits.maxBodyBytes": `bytes of one request body (1024 to 1 GiB, default ${DEFAULT_LIMITS.maxBodyBytes})`,
  "agent.limits.maxJsonDepth": `nesting of arrays and objects in a request body (2 to 10000, default ${DEFAULT_LIMITS.maxJsonDepth})`,
  "agent.maxModelTurns": `upstream model calls one client request may make (1 to 1000, default ${DEFAULT_MAX_MODEL_TURNS})`,
  "agent.hostedTools":
    '"drop" (default: a Responses request\'s hosted tools such as web_search are left out of the run, named in the codecell-dropped-tools header) or "refuse" (such a request gets a 400)',
  "agent.transcriptTtlSeconds": `seconds a conversation's hidden transcript is kept after its last answer (default ${DEFAULT_TRANSCRIPT_TTL_SECONDS})`,
};

/** The checked section with its defaults; null when the config has none (the endpoint is off). */
export function resolveAgentSettings(
  raw: z.infer<ReturnType<typeof agentConfigSchema>> | undefined,
  file: string,
  problems: ConfigProblem[],
): AgentSettings | null {
  if (!raw) return null;
  const { upstream } = raw;
  let baseUrl: URL | null = null;
  try {
    baseUrl = new URL(upstream.baseUrl);
  } catch {
    // The schema checked it is a URL; nothing more to say here.
  }
  if (baseUrl && (baseUrl.username || baseUrl.password)) {
    // Said without the URL itself: the message must not print the secret it is about.
    problems.push({
      file,
      path: "agent.upstream.baseUrl",
      message: `holds a user name or password (before the @ of ${baseUrl.protocol}//…@${baseUrl.host}). Credentials in a URL end up in logs and error messages: take them out of the URL and put the key in agent.upstream.apiKey (sent as the API's key header), or another header in agent.upstream.headers, e.g. { "authorization": "Basic \${UPSTREAM_BASIC_AUTH}" }.`,
    });
  }
  if (upstream.apiKey === "") {
    problems.push({
      file,
      path: "agent.upstream.apiKey",
      message:
        "is empty (an environment variable that is not set?). Set it, or leave apiKey out for an upstream without keys.",
    });
  }
  if (upstream.execAsCustomTool && upstream.api !== "responses") {
    problems.push({
      file,
      path: "agent.upstream.execAsCustomTool",
      message: `applies to a Responses API upstream only (custom tools are that API's): set agent.upstream.api to "responses", or leave execAsCustomTool out.`,
    });
  }
  return {
    upstream: {
      api: upstream.api ?? "chat-completions",
      baseUrl: upstream.baseUrl,
      ...(upstream.apiKey ? { apiKey: upstream.apiKey } : {}),
      ...(upstream.model ? { model: upstream.model } : {}),
      timeoutMs: upstream.timeoutMs ?? DEFAULT_AGENT_TIMEOUT_MS,
      headers: upstream.headers ?? {},
      maxTokens: upstream.maxTokens ?? DEFAULT_UPSTREAM_MAX_TOKENS,
      showAddressInErrors: upstream.showAddressInErrors ?? false,
      execAsCustomTool: upstream.execAsCustomTool ?? false,
    },
    maxModelTurns: raw.maxModelTurns ?? DEFAULT_MAX_MODEL_TURNS,
    transcriptTtlSeconds: raw.transcriptTtlSeconds ?? DEFAULT_TRANSCRIPT_TTL_SECONDS,
    limits: { ...DEFAULT_LIMITS, ...raw.limits },
    hostedTools: raw.hostedTools ?? "drop",
  };
}
