/** A place in a cell, both numbers 1-based as editors show them. */
export type SourceLocation = { line: number; column: number };

/** The 1-based line and column of a UTF-16 offset in `source`; line breaks as ECMAScript counts them. */
export function locationAt(source: string, offset: number): SourceLocation {
  const end = Math.max(0, Math.min(offset, source.length));
  let line = 1;
  let lineStart = 0;
  for (let index = 0; index < end; index++) {
    const char = source.charCodeAt(index);
    // \r\n counts once: the \n that follows a \r ends no new line.
    if (char === 0x0a) {
      if (index === 0 || source.charCodeAt(index - 1) !== 0x0d) line++;
      lineStart = index + 1;
    } else if (char === 0x0d || char === 0x2028 || char === 0x2029) {
      line++;
      lineStart = index + 1;
    }
  }
  return { line, column: end - lineStart + 1 };
}

/** Parsers append " (line:column)" to their messages; the location is reported separately. */
export function withoutLocationSuffix(message: string): string {
  return message.replace(/\s*\(\d+:\d+\)$/, "");
}
