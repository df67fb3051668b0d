// @ts-check

/** The cell is the body of an async function; the opening stays on line 1 so line numbers hold. */
export const CELL_PREFIX = "(async function () {";
export const CELL_FILENAME = "cell.js";

/**
 * A guest error as the model reads it, with its place given in the cell's own lines and columns (the
 * prefix is taken off line 1's columns).
 * @param {{ name: string, message: string, stack?: string }} data
 */
export function describeGuestError(data) {
  let text = `${data.name}: ${data.message}`;
  const where = typeof data.stack === "string" ? /cell\.js:(\d+):(\d+)/.exec(data.stack) : null;
  if (where) {
    const line = Number(where[1]);
    const column = line === 1 ? Math.max(1, Number(where[2]) - CELL_PREFIX.length) : Number(where[2]);
    text += ` (line ${line}, column ${column})`;
  }
  return text;
}
