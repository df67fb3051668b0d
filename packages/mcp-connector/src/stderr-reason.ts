/**
 * The one line of a server's stderr that says why it failed. A crash prints a stack trace, source
 * excerpts and a version banner around one line that names the error; that line is what a person can act
 * on (the whole tail stays in the error's `details.stderr`).
 */

/** Node's `Error: ...` and `Error [ERR_X]: ...`, Python's `FileNotFoundError: ...`, `fatal: ...`. */
const ERROR_LINE = /^(?:[\w.$]*(?:Error|Exception)(?: \[\w+\])?|fatal|error|panic)\b[^:]*:/i;
const MAX_CHARS = 400;

/** The first line that names an error, else the last line; "" for empty stderr. */
export function stderrReason(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const line = lines.find((candidate) => ERROR_LINE.test(candidate)) ?? lines.at(-1) ?? "";
  return line.length > MAX_CHARS ? `${line.slice(0, MAX_CHARS)}...` : line;
}
