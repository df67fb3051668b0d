import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { LOCAL_PRINCIPAL } from "../sessions/run-owner.js";

export type AuthOutcome = { ok: true; principal: string } | { ok: false; reason: "missing" | "invalid" };

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/**
 * Bearer tokens from the config. Tokens are compared as SHA-256 digests with `timingSafeEqual`, and
 * every configured token is compared on every request, so neither the length nor the position of a
 * match shows in the answer time.
 */
export class BearerTokens {
  readonly #entries: Array<{ name: string; digest: Buffer }>;

  constructor(tokens: ReadonlyArray<{ name: string; token: string }>) {
    this.#entries = tokens.map(({ name, token }) => ({ name, digest: digest(token) }));
  }

  /** True when the config has tokens: every /mcp request must then carry one. */
  get required(): boolean {
    return this.#entries.length > 0;
  }

  /**
   * The principal a request speaks for: a token's name, or the local principal when none are set.
   * With `apiKeyHeader`, a request without an Authorization header may send the token as `x-api-key`
   * (how Anthropic's clients send their key).
   */
  authenticate(req: IncomingMessage, options: { apiKeyHeader?: boolean } = {}): AuthOutcome {
    if (!this.required) return { ok: true, principal: LOCAL_PRINCIPAL };
    const header = req.headers.authorization;
    const match = typeof header === "string" ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
    const apiKey = req.headers["x-api-key"];
    const token =
      match?.[1] ??
      (options.apiKeyHeader && header === undefined && typeof apiKey === "string" && apiKey.trim()
        ? apiKey.trim()
        : null);
    if (!token) return { ok: false, reason: "missing" };
    const given = digest(token);
    let principal: string | null = null;
    for (const entry of this.#entries) {
      if (timingSafeEqual(given, entry.digest) && principal === null) principal = entry.name;
    }
    return principal === null ? { ok: false, reason: "invalid" } : { ok: true, principal };
  }
}

/** The `WWW-Authenticate` value of a 401 (RFC 6750): `invalid_token` only when a token was sent. */
export function bearerChallenge(reason: "missing" | "invalid"): string {
  return reason === "invalid"
    ? 'Bearer realm="codecell", error="invalid_token", error_description="The bearer token is not valid."'
    : 'Bearer realm="codecell"';
}
