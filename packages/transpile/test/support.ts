import { CodeModeError } from "@codecell/contract";
import { parse } from "acorn";

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

/** How the sandbox wraps a cell (its worker's CELL_PREFIX in cell-text.js, and the closing line). */
const wrapped = (code: string) => `(async function () {${code}\n})`;

/**
 * Whether `code`, wrapped as the sandbox wraps a cell, parses as exactly one function expression, the
 * sandbox's own: the code never closed the function it is the body of. Null when the wrapped code does
 * not parse (the sandbox's compile then fails the cell with invalid_input).
 */
export function staysOneFunction(code: string): boolean | null {
  let program: ReturnType<typeof parse>;
  try {
    program = parse(wrapped(code), { ecmaVersion: "latest", sourceType: "script" });
  } catch {
    return null;
  }
  const [only] = program.body;
  return (
    program.body.length === 1 &&
    only?.type === "ExpressionStatement" &&
    only.expression.type === "FunctionExpression" &&
    only.expression.end === wrapped(code).length - 1
  );
}
