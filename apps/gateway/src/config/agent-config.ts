// biome-ignore-all lint/suspicious/noTemplateCurlyInString: hints show ${ENV} references as users write them
import { z } from "zod";
import type { ConfigProblem } from "./config-problem.js";

/**
 * The `agent` section: where `POST /v1/chat/completions` sends its model calls, and the bounds of the
 * loop. Parsed here, on its own, so the config loader only hooks it in.
 */
export type AgentSettings = {
  upstream: {
    baseUrl: string;
    apiKey?: string;
    /** The model for requests that name none. */
    model?: string;
    timeoutMs: number;
    headers: Record<string, string>;
  };
  maxModelTurns: number;
  transcriptTtlSeconds: number;
};

export const DEFAULT_AGENT_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_MODEL_TURNS = 16;
export const DEFAULT_TRANSCRIPT_TTL_SECONDS = 3_600;

export const agentConfigSchema = () =>
  z.strictObject({
    upstream: z.strictObject({
      baseUrl: z.url({ protocol: /^https?$/ }),
      apiKey: z.string().optional(),
      model: z.string().min(1).optional(),
      timeoutMs: z.number().int().min(100).max(3_600_000).optional(),
      headers: z.record(z.string(), z.string()).optional(),
    }),
    maxModelTurns: z.number().int().min(1).max(1000).optional(),
    transcriptTtlSeconds: z
      .number()
      .int()
      .min(1)
      .max(30 * 24 * 3600)
      .optional(),
  });

export const AGENT_FIELD_HINTS: Record<string, string> = {
  agent:
    'an object such as { "upstream": { "baseUrl": "https://api.openai.com/v1", "apiKey": "${OPENAI_API_KEY}" } }',
  "agent.upstream": '{ "baseUrl": "https://.../v1", "apiKey": "${OPENAI_API_KEY}", "model": "gpt-4.1" }',
  "agent.upstream.baseUrl":
    'the API root of an OpenAI-compatible server, such as "https://api.openai.com/v1"',
  "agent.upstream.apiKey": 'the upstream\'s API key, best from the environment: "${OPENAI_API_KEY}"',
  "agent.upstream.model": "the model for requests that name none",
  "agent.upstream.timeoutMs": `milliseconds (100 to 3600000, default ${DEFAULT_AGENT_TIMEOUT_MS}) one upstream request may take`,
  "agent.upstream.headers": "an object of header names to string values sent with every upstream request",
  "agent.maxModelTurns": `upstream model calls one client request may make (1 to 1000, default ${DEFAULT_MAX_MODEL_TURNS})`,
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
  if (upstream.apiKey === "") {
    problems.push({
      file,
      path: "agent.upstream.apiKey",
      message:
        "is empty (an environment variable that is not set?). Set it, or leave apiKey out for an upstream without keys.",
    });
  }
  return {
    upstream: {
      baseUrl: upstream.baseUrl,
      ...(upstream.apiKey ? { apiKey: upstream.apiKey } : {}),
      ...(upstream.model ? { model: upstream.model } : {}),
      timeoutMs: upstream.timeoutMs ?? DEFAULT_AGENT_TIMEOUT_MS,
      headers: upstream.headers ?? {},
    },
    maxModelTurns: raw.maxModelTurns ?? DEFAULT_MAX_MODEL_TURNS,
    transcriptTtlSeconds: raw.transcriptTtlSeconds ?? DEFAULT_TRANSCRIPT_TTL_SECONDS,
  };
}
