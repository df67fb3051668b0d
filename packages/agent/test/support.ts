import { AgentError } from "../src/index.js";

/** The AgentError a call fails with; any other outcome fails the test. */
export async function failure(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (error) {
    if (AgentError.is(error)) return error;
    throw error;
  }
  throw new Error("expected the call to fail");
}

/**
 * Resolves once `check()` holds, polling; fails after `limitMs` (generous: what it waits for is an event
 * on the other side of a socket, which a loaded machine delivers late, not a deadline under test).
 */
export async function until(check: () => boolean, limitMs = 20_000): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > giveUpAt) throw new Error(`still not true after ${limitMs} ms: ${check.toString()}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
