/**
 * How deeply a value crossing a thread may nest. V8's structured-clone deserializer gives up somewhere
 * past a thousand levels (a `messageerror` nobody can attribute to a run), QuickJS's recursive
 * `JSON.parse` overflows its stack a little later, and host code that walks results recursively (MCP
 * SDKs, validators) fails in ways the model cannot act on. Real tool data stays far below this.
 */
export const MAX_BRIDGE_DEPTH = 256;

const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;
const QUOTE = 34;
const BACKSLASH = 92;

/**
 * Whether a JSON text nests objects and arrays deeper than `limit`. Valid JSON `depth` levels deep
 * needs at least `2 * depth` characters, so the common small value is answered without looking at it;
 * a large one costs one pass over its characters (no parsing), stopping at the first level too deep.
 */
export function exceedsJsonDepth(text: string, limit = MAX_BRIDGE_DEPTH): boolean {
  if (text.length <= limit * 2) return false;
  let depth = 0;
  let index = 0;
  const length = text.length;
  while (index < length) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) {
      // Skip the string; an escaped character is skipped with its backslash.
      index++;
      while (index < length) {
        const inner = text.charCodeAt(index);
        if (inner === BACKSLASH) index += 2;
        else if (inner === QUOTE) break;
        else index++;
      }
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
    index++;
  }
  return false;
}
