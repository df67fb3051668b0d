import type { ConfigProblem } from "./config-problem.js";
import type { GatewayConfigFile } from "./config-schema.js";

/** `codecell serve --http` settings: who may call, from which host names, and how sessions are kept. */
export type HttpSettings = {
  /** Bearer tokens; empty means no authentication (allowed on loopback only). */
  tokens: Array<{ name: string; token: string }>;
  /** Host header names accepted besides the bound host (and loopback names on a loopback bind). */
  allowedHosts: string[];
  maxSessionsPerPrincipal: number;
  sessionIdleMs: number;
  /** How long a request whose stream dropped may be resumed (Last-Event-ID) before it is cancelled. */
  streamResumeMs: number;
  /** How long a stopping gateway waits for requests and nested calls in flight (SIGTERM/SIGINT). */
  drainMs: number;
};

export const DEFAULT_HTTP_SETTINGS: HttpSettings = {
  tokens: [],
  allowedHosts: [],
  maxSessionsPerPrincipal: 64,
  sessionIdleMs: 600_000,
  streamResumeMs: 5_000,
  drainMs: 10_000,
};

/**
 * The validated `http` section (undefined: absent or invalid) with its defaults, seconds made
 * milliseconds. Each token needs its own name and its own secret: a name is the principal that owns runs.
 */
export function resolveHttpSettings(
  section: GatewayConfigFile["http"],
  file: string,
  problems: ConfigProblem[],
): HttpSettings {
  const http = { ...DEFAULT_HTTP_SETTINGS, tokens: [] as HttpSettings["tokens"] };
  if (!section) return http;
  const names = new Set<string>();
  const secrets = new Set<string>();
  for (const [index, entry] of (section.tokens ?? []).entries()) {
    if (names.has(entry.name)) {
      problems.push({
        file,
        path: `http.tokens.${index}.name`,
        message: `"${entry.name}" is named twice. Each token needs its own name (the principal that owns its runs).`,
      });
    }
    if (secrets.has(entry.token)) {
      problems.push({
        file,
        path: `http.tokens.${index}.token`,
        message: "this token is used twice. Give each principal its own secret.",
      });
    }
    names.add(entry.name);
    secrets.add(entry.token);
    http.tokens.push({ name: entry.name, token: entry.token });
  }
  http.allowedHosts = (section.allowedHosts ?? []).map((host) => host.toLowerCase());
  if (section.maxSessionsPerPrincipal !== undefined)
    http.maxSessionsPerPrincipal = section.maxSessionsPerPrincipal;
  if (section.sessionIdleSeconds !== undefined) http.sessionIdleMs = section.sessionIdleSeconds * 1000;
  if (section.streamResumeSeconds !== undefined) http.streamResumeMs = section.streamResumeSeconds * 1000;
  if (section.drainSeconds !== undefined) http.drainMs = section.drainSeconds * 1000;
  return http;
}
