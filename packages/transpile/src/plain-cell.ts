// No import of the parser here: the sandbox loads this entry on its own, so a plain cell is run without
// acorn ever being loaded (see isPlainJavaScriptCell).

/** Words without which no module-access construct can be written (keywords and `require` alike). */
const MODULE_WORDS = ["import", "export", "require"];

const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const BACKSLASH = 0x5c;
const SLASH = 0x2f;
const STAR = 0x2a;
const BACKTICK = 0x60;
const DOLLAR = 0x24;
const DOT = 0x2e;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_PAREN = 0x28;
const CLOSE_PAREN = 0x29;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const DIGIT_ZERO = 0x30;
const DIGIT_NINE = 0x39;
/** On the bracket stack: the `${` of a template literal, closed by `}` back into the template. */
const TEMPLATE_SUBSTITUTION = -1;

/**
 * Escapes a plain cell may use in strings and templates: each stands for a character that can neither
 * spell a letter of a module word nor change where the literal ends. Any other escape (`\u`, `\x`,
 * octal, a line continuation, `\q` for `q`) can build the text `require` inside a literal, so such a
 * cell goes to the full check.
 */
const PLAIN_ESCAPES = new Set([..."ntrbfv'\"\\`$"].map((character) => character.charCodeAt(0)));

/**
 * True when a JavaScript cell can be run as the body of the sandbox's async function without the
 * parser's check (prepareCell), because it provably holds no module access and cannot close that
 * function: none of the words `import`, `export`, `require` anywhere in its text; no `\` outside a
 * string or template and only escapes that cannot spell a letter inside them; no `/` except comments
 * (a regex or a division goes to the full check: telling them apart needs the parser); no HTML-like
 * comment, lone carriage return or U+2028/U+2029 (where engines can disagree on where a comment or a
 * line ends); every string, template and block comment closed; and every `(`, `[`, `{` and template
 * `${` closed in order, so the function's own `}` is the only one that can end it. It must also hold a
 * `return` outside every bracket, which is then the cell's own (a function body is in braces): a cell
 * without one may end with the expression it means as its result, and only the parser can tell (see
 * resultOfLastExpression in cell-result.ts).
 *
 * False means only "check it fully" (most cells that use `/` are fine). A plain cell may still have a
 * syntax error: the caller compiles it and, if that fails, runs prepareCell on it for the parser's
 * message, so a model sees the same error either way.
 */
export function isPlainJavaScriptCell(source: string): boolean {
  if (typeof source !== "string") return false;
  for (const word of MODULE_WORDS) if (source.includes(word)) return false;
  if (source.includes("<!--") || source.includes("-->")) return false;
  if (source.includes("\u2028") || source.includes("\u2029")) return false;
  const brackets: number[] = [];
  const length = source.length;
  let topLevelReturn = false;
  let index = 0;
  // Each step moves `index` forward by at least one character, so the loop ends.
  while (index < length) {
    const code = source.charCodeAt(index);
    if (code === CARRIAGE_RETURN && source.charCodeAt(index + 1) !== LINE_FEED) return false;
    if (code === SLASH) {
      const next = source.charCodeAt(index + 1);
      if (next === SLASH) {
        const end = lineEnd(source, index + 2);
        if (end < 0) return false;
        index = end;
      } else if (next === STAR) {
        const end = source.indexOf("*/", index + 2);
        if (end < 0) return false;
        index = end + 2;
      } else {
        return false;
      }
    } else if (code === 0x22 || code === 0x27) {
      index = stringEnd(source, index + 1, code);
      if (index < 0) return false;
    } else if (code === BACKTICK) {
      index = templateChunkEnd(source, index + 1, brackets);
      if (index < 0) return false;
    } else if (code === OPEN_BRACE || code === OPEN_PAREN || code === OPEN_BRACKET) {
      brackets.push(code);
      index += 1;
    } else if (code === CLOSE_BRACE) {
      const open = brackets.pop();
      if (open === TEMPLATE_SUBSTITUTION) {
        index = templateChunkEnd(source, index + 1, brackets);
        if (index < 0) return false;
      } else if (open === OPEN_BRACE) {
        index += 1;
      } else {
        return false;
      }
    } else if (code === CLOSE_PAREN || code === CLOSE_BRACKET) {
      if (brackets.pop() !== (code === CLOSE_PAREN ? OPEN_PAREN : OPEN_BRACKET)) return false;
      index += 1;
    } else if (code === BACKSLASH) {
      return false;
    } else {
      if (!topLevelReturn && brackets.length === 0 && isReturnKeywordAt(source, index)) topLevelReturn = true;
      index += 1;
    }
  }
  return brackets.length === 0 && topLevelReturn;
}

const RETURN = "return";

/**
 * Whether the word `return` starts at `index` as a whole word that is no property name (`x.return`).
 * Called only outside strings, templates and comments. A miss only sends the cell to the parser.
 */
function isReturnKeywordAt(source: string, index: number): boolean {
  if (!source.startsWith(RETURN, index)) return false;
  if (isWordCharacter(source.charCodeAt(index + RETURN.length))) return false;
  let before = index - 1;
  while (before >= 0 && isSpace(source.charCodeAt(before))) before -= 1;
  if (before < 0) return true;
  const previous = source.charCodeAt(before);
  return previous !== DOT && !(before === index - 1 && isWordCharacter(previous));
}

/** ASCII letters, digits, `_` and `$`, and anything beyond ASCII (which may be part of a name). */
function isWordCharacter(code: number): boolean {
  if (Number.isNaN(code)) return false;
  return (
    (code >= 0x61 && code <= 0x7a) ||
    (code >= 0x41 && code <= 0x5a) ||
    (code >= DIGIT_ZERO && code <= DIGIT_NINE) ||
    code === 0x5f ||
    code === DOLLAR ||
    code > 0x7f
  );
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === LINE_FEED || code === CARRIAGE_RETURN;
}

/** Index of the line feed that ends a line comment starting at `from`, or the text's end; -1 if unsure. */
function lineEnd(source: string, from: number): number {
  const end = source.indexOf("\n", from);
  const stop = end < 0 ? source.length : end;
  // A carriage return ends a comment too; only as part of \r\n is it where everyone agrees.
  const carriageReturn = source.indexOf("\r", from);
  if (carriageReturn >= 0 && carriageReturn < stop && carriageReturn !== stop - 1) return -1;
  return stop;
}

/** Whether the escape at `index` (just after a backslash) is one of PLAIN_ESCAPES or a lone `\0`. */
function plainEscape(source: string, index: number): boolean {
  const code = source.charCodeAt(index);
  if (PLAIN_ESCAPES.has(code)) return true;
  if (code !== DIGIT_ZERO) return false;
  const next = source.charCodeAt(index + 1);
  return !(next >= DIGIT_ZERO && next <= DIGIT_NINE);
}

/** Index just past the closing quote of a string whose body starts at `from`; -1 if not plain. */
function stringEnd(source: string, from: number, quote: number): number {
  for (let index = from; index < source.length; index++) {
    const code = source.charCodeAt(index);
    if (code === quote) return index + 1;
    if (code === LINE_FEED || code === CARRIAGE_RETURN) return -1;
    if (code === BACKSLASH) {
      if (!plainEscape(source, index + 1)) return -1;
      index += 1;
    }
  }
  return -1;
}

/**
 * Index just past the end of a template chunk starting at `from`: its closing backtick, or a `${`
 * (pushed on `brackets`, so its `}` resumes the template); -1 if not plain.
 */
function templateChunkEnd(source: string, from: number, brackets: number[]): number {
  for (let index = from; index < source.length; index++) {
    const code = source.charCodeAt(index);
    if (code === BACKTICK) return index + 1;
    if (code === DOLLAR && source.charCodeAt(index + 1) === OPEN_BRACE) {
      brackets.push(TEMPLATE_SUBSTITUTION);
      return index + 2;
    }
    if (code === BACKSLASH) {
      if (!plainEscape(source, index + 1)) return -1;
      index += 1;
    }
  }
  return -1;
}
