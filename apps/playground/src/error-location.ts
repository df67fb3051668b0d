/** Where in the cell an error points, 1-based, as the gateway's messages say it. */
export type ErrorLocation = { line: number; column?: number };

// The engine and the transpiler word locations a few ways: "(line 3, column 1)", "at line 1:14",
// "line 7". The first pattern that matches wins.
const PATTERNS: RegExp[] = [/\bline (\d+), column (\d+)\b/i, /\bline (\d+):(\d+)\b/i, /\bline (\d+)\b/i];

/** The line (and column when given) a failed result's message points to, or null when it names none. */
export function errorLocation(message: string | undefined): ErrorLocation | null {
  if (!message) return null;
  for (const pattern of PATTERNS) {
    const match = pattern.exec(message);
    if (!match) continue;
    const line = Number(match[1]);
    if (!Number.isSafeInteger(line) || line < 1) continue;
    return match[2] === undefined ? { line } : { line, column: Number(match[2]) };
  }
  return null;
}
