import { type Options, type Program, parse } from "acorn";
import { locationAt, type SourceLocation, withoutLocationSuffix } from "./source-location.js";

/**
 * Parser options that match how the sandbox runs a cell: the body of a sloppy-mode async function.
 * `return` and `await` are legal at the top; a hashbang is not. Import and export declarations are
 * allowed *by the parser* everywhere so that they reach the module-access rules (and are refused there
 * with `module_access_denied`) instead of being reported as a mere syntax error.
 */
const cellParserOptions: Options = {
  ecmaVersion: "latest",
  sourceType: "script",
  allowReturnOutsideFunction: true,
  allowAwaitOutsideFunction: true,
  allowImportExportEverywhere: true,
  allowHashBang: false,
};

export type ParseFailure = SourceLocation & { reason: string };

export type ParseOutcome = { ok: true; program: Program } | { ok: false; failure: ParseFailure };

/** Parses `javascript` as a cell body. Never throws: a failure comes back with its place and reason. */
export function parseCellBody(javascript: string): ParseOutcome {
  try {
    return { ok: true, program: parse(javascript, cellParserOptions) };
  } catch (error) {
    if (error instanceof SyntaxError) {
      const position = (error as SyntaxError & { pos?: unknown }).pos;
      const offset = typeof position === "number" ? position : 0;
      return {
        ok: false,
        failure: { ...locationAt(javascript, offset), reason: withoutLocationSuffix(error.message) },
      };
    }
    // The parser recurses; absurd nesting exhausts the host stack. That is the cell's fault, not ours.
    if (error instanceof RangeError) {
      return {
        ok: false,
        failure: { line: 1, column: 1, reason: "the code is nested too deeply to parse" },
      };
    }
    throw error;
  }
}
