// @ts-check

/** The cell is the body of an async function; the opening stays on line 1 so line numbers hold. */
export const CELL_PREFIX = "(async function () {";
export const CELL_FILENAME = "cell.js";

/**
 * The file name a cell is compiled under: CELL_FILENAME, and when its preparation inserted text into a
 * line (@codecell/transpile's `inserted`), where and how much, as `cell.js@<line>.<column>+<length>`.
 * The name is kept in the cell's compiled functions, so errors read their place right in a run restored
 * from a snapshot too.
 * @param {{ line: number, column: number, length: number } | null} inserted
 */
export function cellFilename(inserted) {
  if (inserted === null) return CELL_FILENAME;
  return `${CELL_FILENAME}@${inserted.line}.${inserted.column}+${inserted.length}`;
}

const CELL_PLACE = /cell\.js(?:@(\d+)\.(\d+)\+(\d+))?:(\d+):(\d+)/;

/**
 * A guest error as the model reads it, with its place given in the cell's own lines and columns (the
 * prefix is taken off line 1's columns).
 * @param {{ name: string, message: string, stack?: string }} data
 */
export function describeGuestError(data) {
  let text = `${data.name}: ${data.message}`;
  const where = typeof data.stack === "string" ? CELL_PLACE.exec(data.stack) : null;
  if (where) {
    const line = Number(where[4]);
    let column = line === 1 ? Number(where[5]) - CELL_PREFIX.length : Number(where[5]);
    if (where[1] !== undefined && Number(where[1]) === line) {
      // Past the inserted text, the user's column is that much to the left; inside it (QuickJS places
      // some errors at the statement the text begins with), it is where the user's expression starts.
      const start = Number(where[2]);
      const length = Number(where[3]);
      if (column >= start + length) column -= length;
      else if (column >= start) column = start;
    }
    text += ` (line ${line}, column ${Math.max(1, column)})`;
  }
  return text;
}
