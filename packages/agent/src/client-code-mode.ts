/**
 * A client that brings its own code mode (the Codex CLI with its default models) offers the model a
 * freeform `exec` tool whose input is JavaScript, and a `wait` beside it; its real tools (the shell,
 * apply_patch, ...) exist only as declarations in that exec's description. In front of such a client
 * the endpoint's code mode replaces the client's: the declared tools become client tools a cell calls
 * directly, and the client's exec and wait are left out (code mode inside code mode would show the
 * model two ways to run code). A declared tool's call goes back to the client as an ordinary call of
 * that tool, which such a client runs as it runs the model's own calls.
 */

/** A tool declared in a client's code-mode description; `freeform` (no parameters) when its input is one string. */
export type DeclaredTool = { name: string; description: string; parameters?: unknown; freeform: boolean };

/** The description of a client's exec tool declares tools for its cells: it is the client's code mode. */
export function isClientCodeMode(tool: Record<string, unknown>): boolean {
  return (
    tool.name === "exec" &&
    typeof tool.description === "string" &&
    /declare const tools\s*:\s*\{/.test(tool.description)
  );
}

/** A `### \`name\`` heading, the prose under it, then its `declare const tools: { ... }` block. */
const SECTION = /^###\s+`([A-Za-z_$][\w$]*)`\s*$/gm;
const DECLARATION = /```ts\s*\n\s*declare const tools\s*:\s*\{\s*[\w$]+\(([\s\S]*?)\n?```/;

/**
 * The tools a client's code-mode exec description declares, with JSON Schema parameters read from
 * each declaration's argument fields (their names, whether optional, simple types, and the comment
 * above each as its description). A field of a type this reader does not map takes any value.
 */
export function declaredTools(description: string): DeclaredTool[] {
  const headings = [...description.matchAll(SECTION)];
  const tools: DeclaredTool[] = [];
  headings.forEach((heading, index) => {
    const end = headings[index + 1]?.index ?? description.length;
    const body = description.slice((heading.index ?? 0) + heading[0].length, end);
    const declaration = DECLARATION.exec(body);
    if (!declaration) return;
    const prose = body
      .slice(0, declaration.index)
      .replace(/exec tool declaration:\s*$/, "")
      .trim();
    const signature = declaration[1] ?? "";
    const freeform = /^\s*\w+\s*:\s*string\s*\)/.test(signature);
    tools.push({
      name: heading[1]!,
      description: prose,
      ...(freeform ? {} : { parameters: argumentSchema(signature) }),
      freeform,
    });
  });
  return tools;
}

/** The JSON Schema of an `args: { ... }` parameter: its top-level fields. */
function argumentSchema(signature: string): Record<string, unknown> {
  const open = signature.indexOf("{");
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  if (open >= 0) {
    let depth = 0;
    let comment: string[] = [];
    for (const raw of signature.slice(open).split("\n")) {
      const line = raw.trim();
      const before = depth;
      for (const char of line) {
        if (char === "{" || char === "(" || char === "<") depth++;
        else if (char === "}" || char === ")" || char === ">") depth--;
      }
      if (before !== 1) continue;
      if (line.startsWith("//")) {
        comment.push(line.replace(/^\/\/\s?/, ""));
        continue;
      }
      const field = /^([A-Za-z_$][\w$]*)(\?)?\s*:\s*(.+?);?$/.exec(line);
      if (field) {
        const schema = typeSchema(field[3]!.trim());
        properties[field[1]!] = comment.length ? { ...schema, description: comment.join(" ") } : schema;
        if (!field[2]) required.push(field[1]!);
      }
      comment = [];
    }
  }
  return { type: "object", properties, ...(required.length ? { required } : {}) };
}

/** A TypeScript field type as JSON Schema, for the simple types declarations use; else any value. */
function typeSchema(type: string): Record<string, unknown> {
  if (type === "string" || type === "number" || type === "boolean") return { type };
  const array = /^Array<(.+)>$/.exec(type) ?? /^(\w+)\[\]$/.exec(type);
  if (array) return { type: "array", items: typeSchema(array[1]!.trim()) };
  const literals = type.split("|").map((part) => /^\s*"([^"]*)"\s*$/.exec(part)?.[1]);
  if (literals.every((literal) => literal !== undefined)) return { type: "string", enum: literals };
  return {};
}
