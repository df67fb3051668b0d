/**
 * The JSON Schema of a tool's parameters, read from the TypeScript parameter list a client's code-mode
 * description declares it with (see client-code-mode.ts). The reader knows the types such
 * declarations use: primitives, string literals and their unions, arrays, records and inline object
 * types, whose fields carry the comment above them as their description. Anything else takes any
 * value. It reads a client's text, so it never throws, scans each level once (comments and string
 * literals skipped, `=>` no bracket), and reads types at most MAX_DEPTH levels deep: past that, or
 * where brackets do not balance, a type takes any value.
 */

export type Schema = Record<string, unknown>;

/** Types nested deeper than this take any value: the work stays linear in the declaration's length. */
const MAX_DEPTH = 8;
const OPENERS = "([{<";
const CLOSERS = ")]}>";
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** What a tool's parameter list declares: one string (a freeform tool), or an object's schema. */
export type DeclaredParameters = { freeform: true } | { freeform: false; schema: Schema };

/** Where the string literal or comment starting at `at` ends; `at` itself when none starts there. */
function skipOpaque(text: string, at: number): number {
  const char = text[at];
  if (char === '"' || char === "'" || char === "`") {
    let index = at + 1;
    while (index < text.length && text[index] !== char) index += text[index] === "\\" ? 2 : 1;
    return Math.min(index + 1, text.length);
  }
  if (char === "/" && text[at + 1] === "/") {
    const newline = text.indexOf("\n", at);
    return newline < 0 ? text.length : newline;
  }
  if (char === "/" && text[at + 1] === "*") {
    const end = text.indexOf("*/", at + 2);
    return end < 0 ? text.length : end + 2;
  }
  return at;
}

/**
 * The index of the first of `stops` outside brackets, strings and comments from `from`, or of a
 * closing bracket that was not opened after `from` (the end of the enclosing scope), or the length.
 */
export function scanTo(text: string, from: number, stops: string): number {
  let depth = 0;
  let index = from;
  while (index < text.length) {
    const skipped = skipOpaque(text, index);
    if (skipped !== index) {
      index = skipped;
      continue;
    }
    const char = text[index]!;
    if (depth === 0 && stops.includes(char)) return index;
    if (OPENERS.includes(char)) depth++;
    else if (CLOSERS.includes(char) && !(char === ">" && text[index - 1] === "=")) {
      if (depth === 0) return index;
      depth--;
    }
    index++;
  }
  return text.length;
}

/** `text` split at `separator` outside brackets, strings and comments. */
function splitTop(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  for (;;) {
    const end = scanTo(text, start, separator);
    parts.push(text.slice(start, end));
    if (end >= text.length || text[end] !== separator) return parts;
    start = end + 1;
  }
}

/** `text` without its comments (string literals kept as they are). */
function withoutComments(text: string): string {
  if (!text.includes("/")) return text;
  const kept: string[] = [];
  let from = 0;
  let index = 0;
  while (index < text.length) {
    const skipped = skipOpaque(text, index);
    if (skipped === index) index++;
    else {
      if (text[index] === "/") kept.push(text.slice(from, index), " ");
      else kept.push(text.slice(from, skipped));
      index = skipped;
      from = index;
    }
  }
  kept.push(text.slice(from));
  return kept.join("");
}

/** Where the code of `text` starts: past its leading whitespace and comments. */
function codeStart(text: string): number {
  let index = 0;
  while (index < text.length) {
    if (/\s/.test(text[index]!)) index++;
    else if (text[index] === "/" && skipOpaque(text, index) !== index) index = skipOpaque(text, index);
    else break;
  }
  return index;
}

/** A string literal type's value, or undefined when `type` is not one. */
function stringLiteral(type: string): string | undefined {
  const quote = type[0];
  if ((quote !== '"' && quote !== "'") || type.length < 2 || skipOpaque(type, 0) !== type.length) {
    return undefined;
  }
  return type.slice(1, -1).replace(/\\(.)/g, "$1");
}

/** Whether the bracket opening `type` closes at its last character (`{ ... }`, `( ... )`). */
const wrapped = (type: string, open: string, close: string): boolean =>
  type.startsWith(open) && type.endsWith(close) && scanTo(type, 1, "") === type.length - 1;

/** A TypeScript type as JSON Schema; `{}` (any value) for what this reader does not map. */
export function typeSchema(raw: string, depth = 0): Schema {
  if (depth > MAX_DEPTH) return {};
  // A union may start with its separator (`| "a" | "b"` over several lines): blank members go.
  const members = splitTop(raw, "|").filter((member) => withoutComments(member).trim() !== "");
  if (members.length > 1) {
    const schemas = members.map((member) => typeSchema(member, depth + 1));
    const literals = members.map((member) => stringLiteral(withoutComments(member).trim()));
    if (literals.every((literal) => literal !== undefined)) return { type: "string", enum: literals };
    if (schemas.some((schema) => Object.keys(schema).length === 0)) return {};
    return { anyOf: schemas };
  }
  const member = members[0] ?? "";
  const single = withoutComments(member).trim();
  if (single === "string" || single === "number" || single === "boolean" || single === "null") {
    return { type: single };
  }
  const literal = stringLiteral(single);
  if (literal !== undefined) return { type: "string", enum: [literal] };
  if (wrapped(single, "(", ")")) return typeSchema(single.slice(1, -1), depth + 1);
  if (wrapped(single, "{", "}")) {
    // The fields' comments are their descriptions: the object is read from the text that has them.
    const open = codeStart(member) + 1;
    return objectSchema(member.slice(open, scanTo(member, open, "")), depth + 1);
  }
  if (single.endsWith("[]")) return { type: "array", items: typeSchema(single.slice(0, -2), depth + 1) };
  const generic = /^(Array|ReadonlyArray|Record)\s*</.exec(single);
  if (generic && wrapped(single.slice(generic[0].length - 1), "<", ">")) {
    const args = splitTop(single.slice(generic[0].length, -1), ",");
    if (generic[1] === "Record") {
      return args.length === 2
        ? { type: "object", additionalProperties: typeSchema(args[1]!, depth + 1) }
        : { type: "object" };
    }
    return args.length === 1 ? { type: "array", items: typeSchema(args[0]!, depth + 1) } : { type: "array" };
  }
  return {};
}

/** A comment's words, without its markers. */
function commentText(comment: string): string {
  return comment
    .replace(/^\/\/\s?/, "")
    .replace(/^\/\*+|\*+\/$/g, "")
    .split("\n")
    .map((line) => line.replace(/^\s*\*?\s?/, "").trim())
    .filter(Boolean)
    .join(" ");
}

/**
 * The fields of an object type's body (between its braces): each `name?: type` ends at `;`, `,` or
 * a newline that does not go on with the type; the comments above a field describe it.
 */
function objectSchema(body: string, depth: number): Schema {
  const properties: Record<string, Schema> = {};
  const required = new Set<string>();
  let comments: string[] = [];
  let index = 0;
  while (index < body.length) {
    const char = body[index]!;
    if (/\s|[;,]/.test(char)) {
      index++;
      continue;
    }
    const skipped = skipOpaque(body, index);
    if (skipped !== index && char === "/") {
      comments.push(commentText(body.slice(index, skipped)));
      index = skipped;
      continue;
    }
    const colon = scanTo(body, index, ":;,\n");
    if (body[colon] !== ":") {
      // Not a field (an index or method signature, a stray word): what was above it described it.
      index = colon + 1;
      comments = [];
      continue;
    }
    let end = colon + 1;
    let last = "";
    for (;;) {
      const start = end;
      end = scanTo(body, start, ";,\n");
      last = withoutComments(body.slice(start, end)).trim().at(-1) ?? last;
      if (body[end] !== "\n") break;
      // A newline ends the field unless the type goes on (`|` or `&` before or after it, or no type yet).
      let next = end + 1;
      while (next < body.length && /\s/.test(body[next]!)) next++;
      if (last !== "" && last !== "|" && last !== "&" && body[next] !== "|" && body[next] !== "&") break;
      end = next;
    }
    const key = body
      .slice(index, colon)
      .trim()
      .replace(/^readonly\s+/, "");
    const optional = key.endsWith("?");
    const name = optional ? key.slice(0, -1).trim() : key;
    const field = IDENTIFIER.test(name) ? name : stringLiteral(name);
    if (field !== undefined && field !== "__proto__") {
      const schema = typeSchema(body.slice(colon + 1, end), depth);
      const description = comments.filter(Boolean).join(" ");
      properties[field] = description ? { ...schema, description } : schema;
      if (optional) required.delete(field);
      else required.add(field);
    }
    comments = [];
    index = end + 1;
    // A comment after the field on its own line is the field's, not the next one's.
    while (index < body.length && /[ \t;,]/.test(body[index]!)) index++;
    if (body[index] === "/" && skipOpaque(body, index) !== index) index = skipOpaque(body, index);
  }
  return { type: "object", properties, ...(required.size ? { required: [...required] } : {}) };
}

/**
 * A tool's parameter list (the text between its parentheses) as what the tool takes: one string
 * parameter makes a freeform tool; an object type parameter gives its fields; no parameter, none;
 * a parameter of another type (a named one this reader cannot see) takes any object.
 */
export function declaredParameters(list: string): DeclaredParameters {
  const parameters = splitTop(list, ",").filter((parameter) => withoutComments(parameter).trim() !== "");
  const first = parameters[0];
  if (first === undefined) return { freeform: false, schema: { type: "object", properties: {} } };
  const colon = scanTo(first, 0, ":");
  const type = first.slice(colon + 1);
  if (parameters.length === 1 && withoutComments(type).trim() === "string") return { freeform: true };
  const schema = colon < first.length ? typeSchema(type) : {};
  return { freeform: false, schema: schema.type === "object" ? schema : { type: "object" } };
}
