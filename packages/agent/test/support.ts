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
