/**
 * A client that brings its own code mode (the Codex CLI with its default models) offers the model a
 * freeform `exec` tool whose input is JavaScript, and a `wait` beside it; its real tools (the shell,
 * apply_patch, ...) exist only as declarations in that exec's description. In front of such a client
 * the endpoint's code mode replaces the client's: the declared tools become client tools a cell calls
 * directly, and the client's exec and wait are left out (code mode inside code mode would show the
 * model two ways to run code). A declared tool's call goes back to the client as an ordinary call of
 * that tool, which such a client runs as it runs the model's own calls.
 */

import { type DeclaredParameters, declaredParameters, scanTo } from "./declared-parameters.js";

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

/** A `### \`name\`` heading: a declared tool's section, its prose then its declaration. */
const SECTION = /^###[ \t]+`([A-Za-z_$][\w$]*)`[ \t]*$/gm;
/** The start of a section's declaration, up to its tool's opening parenthesis. */
const DECLARATION = /^\s*declare const tools\s*:\s*\{\s*[A-Za-z_$][\w$]*\s*\(/;
const FENCE = "```ts";
/**
 * A parameter list longer than this (a real one is a few KiB) is not read field by field: the tool
 * takes any object, and a hostile description costs one scan.
 */
const MAX_PARAMETER_LIST = 64 * 1024;

/**
 * The tools a client's code-mode exec description declares: each section's prose is the tool's
 * description and its `declare const tools: { name(...) }` block gives its parameters (read by
 * declared-parameters.ts). A section without such a block declares nothing. The description is a
 * client's text: this reads it once, never throws, and treats what it cannot read as any value.
 */
export function declaredTools(description: string): DeclaredTool[] {
  const headings = [...description.matchAll(SECTION)];
  const tools: DeclaredTool[] = [];
  // The next fence and the next closing one (-1: none left), each looked up again only once passed:
  // the sections are in order, so the description is searched once however many sections there are.
  const after = (found: number, from: number, text: string) =>
    found === -1 || found >= from ? found : description.indexOf(text, from);
  let fence = -2;
  let close = -2;
  headings.forEach((heading, index) => {
    const start = (heading.index ?? 0) + heading[0].length;
    const end = headings[index + 1]?.index ?? description.length;
    fence = after(fence, start, FENCE);
    if (fence < 0 || fence >= end) return;
    close = after(close, fence + FENCE.length, "```");
    const code = description.slice(fence + FENCE.length, close < 0 || close > end ? end : close);
    const declaration = DECLARATION.exec(code);
    if (!declaration) return;
    const open = declaration[0].length;
    const list = code.slice(open, scanTo(code, open, ""));
    const parameters: DeclaredParameters =
      list.length > MAX_PARAMETER_LIST
        ? { freeform: false, schema: { type: "object" } }
        : declaredParameters(list);
    const prose = description
      .slice(start, fence)
      .replace(/exec tool declaration:\s*$/, "")
      .trim();
    tools.push({
      name: heading[1]!,
      description: prose,
      ...(parameters.freeform ? {} : { parameters: parameters.schema }),
      freeform: parameters.freeform,
    });
  });
  return tools;
}
