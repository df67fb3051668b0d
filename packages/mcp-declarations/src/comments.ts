const LINE_BREAKS = /\r\n|[\r\n\u2028\u2029]/;

/** Text safe inside a block comment: a star-slash in server text would end the comment early. */
export function escapeCommentText(text: string): string {
  return text.replace(/\*\//g, "*\\/");
}

/** Text safe on one `//` line or one JSDoc line: line breaks folded to spaces. */
export function oneLine(text: string): string {
  return escapeCommentText(text.split(LINE_BREAKS).join(" ").replace(/\s+/g, " ").trim());
}

/** Cuts text at a limit on a word boundary, marking the cut. */
export function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const cut = text.slice(0, limit);
  const space = cut.lastIndexOf(" ");
  return (space > limit * 0.6 ? cut.slice(0, space) : cut) + " …";
}

/**
 * A JSDoc block at an indent, from paragraphs of text (line breaks kept, trailing blank lines
 * dropped). Empty input gives an empty string. One short line becomes a one-line comment.
 */
export function jsDoc(lines: string[], indent: string): string {
  const body: string[] = [];
  const width = Math.max(40, 110 - indent.length - 3);
  for (const line of lines) {
    for (const part of escapeCommentText(line).split(LINE_BREAKS)) body.push(...wrap(part.trimEnd(), width));
  }
  while (body.length > 0 && body[body.length - 1] === "") body.pop();
  while (body.length > 0 && body[0] === "") body.shift();
  if (body.length === 0) return "";
  if (body.length === 1 && body[0]!.length + indent.length + 7 <= 110) {
    return `${indent}/** ${body[0]} */\n`;
  }
  return `${indent}/**\n${body.map((line) => (line === "" ? `${indent} *` : `${indent} * ${line}`)).join("\n")}\n${indent} */\n`;
}

/** Word-wraps one line to a width; a word longer than the width stays whole. */
function wrap(line: string, width: number): string[] {
  if (line.length <= width) return [line];
  const lead = /^\s*(?:[-*] |\d+\. )?/.exec(line)![0];
  const hanging = " ".repeat(lead.length);
  const out: string[] = [];
  let current = "";
  for (const word of line.slice(lead.length).split(" ")) {
    const prefix = out.length === 0 ? lead : hanging;
    if (current !== "" && prefix.length + current.length + 1 + word.length > width) {
      out.push(prefix + current);
      current = word;
    } else {
      current = current === "" ? word : `${current} ${word}`;
    }
  }
  out.push((out.length === 0 ? lead : hanging) + current);
  return out;
}
