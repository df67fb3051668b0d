import type { RunContext } from "@codecell/engine";

/** Who every gateway run belongs to, as the engine and the snapshot store see it. */
export const GATEWAY_AGENT_ID = "codecell-gateway";

/** The principal of a transport without authentication: stdio, or HTTP on loopback without tokens. */
export const LOCAL_PRINCIPAL = "local";

/**
 * Who owns a run: the authenticated principal (a token's `name`) and a conversation (the client's
 * `codecell-session` header, else its MCP session). Any MCP session of the same owner may `wait` on the
 * run; anyone else gets the unknown-runId answer, because the snapshot store compares these fields.
 */
export type RunOwner = {
  principal: string;
  conversation: string;
  /**
   * A 2026-07-28 client: each of its requests is a session of its own, but the owner goes on after it,
   * so what the owner keeps (its cells' stored values) ends with its TTL, never with a session.
   */
  stateless?: boolean;
};

/** A run context for an owner: the principal is the session key, principal and conversation the session. */
export function ownerContext(
  owner: RunOwner,
): Pick<RunContext, "agentId" | "sessionKey" | "sessionId" | "runId"> {
  // Encoded so that no principal or conversation can spell another pair ("a/b" + "c" vs "a" + "b/c").
  const key = `${encodeURIComponent(owner.principal)}/${encodeURIComponent(owner.conversation)}`;
  return {
    agentId: GATEWAY_AGENT_ID,
    sessionKey: `principal:${encodeURIComponent(owner.principal)}`,
    sessionId: key,
    runId: key,
  };
}
