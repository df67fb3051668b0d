import { CodeModeError } from "@codecell/contract";

// Test helpers only (never exported from the package index).

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
  body: string,
) => () => Promise<unknown>;

/** Runs prepared JavaScript the way the sandbox does: as the body of an async function. */
export function runAsCellBody(javascript: string): Promise<unknown> {
  return new AsyncFunction(javascript)();
}

export async function rejection(run: () => Promise<unknown>): Promise<CodeModeError> {
  try {
    await run();
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("expected a CodeModeError, but the call succeeded");
}
