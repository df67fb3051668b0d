import { CodeModeError } from "@codecell/contract/errors";
import type { Node, Program } from "acorn";
import { parseCellBody } from "./javascript-parser.js";
import { locationAt, type SourceLocation } from "./source-location.js";

/** The module-loading constructs a cell may not use. */
export const MODULE_ACCESS_CONSTRUCTS = [
  "import-declaration",
  "export-declaration",
  "dynamic-import",
  "import-meta",
  "require",
  "loader-member",
] as const;

export type ModuleAccessConstruct = (typeof MODULE_ACCESS_CONSTRUCTS)[number];

export type ModuleAccessFinding = SourceLocation & { construct: ModuleAccessConstruct; description: string };

/**
 * Objects through which Node-style hosts expose a loader (`globalThis.require`, `module.require`,
 * `process.mainModule.require`). Reading `.require` off a chain rooted at one of them is refused; on any
 * other object (`client.require(...)`) it is an ordinary method.
 */
const loaderHolders: ReadonlySet<string> = new Set([
  "globalThis",
  "global",
  "self",
  "window",
  "module",
  "process",
]);

type AnyNode = Node & Record<string, unknown>;
type Visit = { node: AnyNode; parent: AnyNode | undefined; key: string };

/**
 * Every module-access construct in a parsed cell, in source order. Works on the AST, so the same words
 * inside strings, templates, regular expressions, comments or longer identifiers never match.
 */
export function findModuleAccessInProgram(program: Program, source: string): ModuleAccessFinding[] {
  const findings: ModuleAccessFinding[] = [];
  const stack: Visit[] = [{ node: program as unknown as AnyNode, parent: undefined, key: "" }];
  // Each AST node is pushed exactly once, so the loop is bounded by the size of the tree.
  for (let visit = stack.pop(); visit !== undefined; visit = stack.pop()) {
    const found = classify(visit);
    if (found !== undefined) {
      findings.push({ ...locationAt(source, visit.node.start), construct: found[0], description: found[1] });
    }
    pushChildren(visit.node, stack);
  }
  return findings.sort((left, right) => left.line - right.line || left.column - right.column);
}

function pushChildren(node: AnyNode, stack: Visit[]): void {
  for (const key of Object.keys(node)) {
    if (key === "type" || key === "start" || key === "end" || key === "loc" || key === "range") continue;
    // A shorthand property `{ require }` holds one identifier twice; visit it once, as the value.
    if (key === "key" && node.type === "Property" && node.shorthand === true) continue;
    const value = node[key];
    if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index--) {
        if (isNode(value[index])) stack.push({ node: value[index], parent: node, key });
      }
    } else if (isNode(value)) {
      stack.push({ node: value, parent: node, key });
    }
  }
}

function isNode(value: unknown): value is AnyNode {
  return (
    typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string"
  );
}

function classify({ node, parent, key }: Visit): [ModuleAccessConstruct, string] | undefined {
  switch (node.type) {
    case "ImportDeclaration":
      return ["import-declaration", "an import declaration"];
    case "ExportNamedDeclaration":
    case "ExportDefaultDeclaration":
    case "ExportAllDeclaration":
      return ["export-declaration", "an export statement"];
    case "ImportExpression":
      return ["dynamic-import", "a dynamic import()"];
    case "MetaProperty":
      return (node.meta as AnyNode).name === "import" ? ["import-meta", "import.meta"] : undefined;
    case "Identifier":
      return node.name === "require" && isReference(parent, key)
        ? ["require", describeRequire(parent, key)]
        : undefined;
    case "MemberExpression":
      return readsLoaderMember(node) ? ["loader-member", `${rootName(node)}...require`] : undefined;
    default:
      return undefined;
  }
}

/**
 * Whether an identifier in this slot names a variable. Property names (`obj.require`, `{ require: 1 }`,
 * class members), labels and the operand of `typeof` are not references; every other use of the name
 * `require` is, including a local declaration that shadows it: the name is reserved in cells.
 */
function isReference(parent: AnyNode | undefined, key: string): boolean {
  if (parent === undefined) return true;
  switch (parent.type) {
    case "MemberExpression":
      return key !== "property" || parent.computed === true;
    case "Property":
    case "MethodDefinition":
    case "PropertyDefinition":
      return key !== "key" || parent.computed === true;
    case "LabeledStatement":
    case "BreakStatement":
    case "ContinueStatement":
      return key !== "label";
    case "UnaryExpression":
      return parent.operator !== "typeof";
    default:
      return true;
  }
}

function describeRequire(parent: AnyNode | undefined, key: string): string {
  if ((parent?.type === "CallExpression" || parent?.type === "NewExpression") && key === "callee") {
    return "a require(...) call";
  }
  if (parent?.type === "MemberExpression" && key === "object") return "a use of require's members";
  return "the name require";
}

function readsLoaderMember(node: AnyNode): boolean {
  const property = node.property as AnyNode;
  const named =
    node.computed === true
      ? property.type === "Literal" && property.value === "require"
      : property.type === "Identifier" && property.name === "require";
  return named && loaderHolders.has(rootName(node) ?? "");
}

function rootName(node: AnyNode): string | undefined {
  let current: AnyNode = node;
  // Member chains are finite; each step moves one level towards the leftmost object.
  while (current.type === "MemberExpression") current = current.object as AnyNode;
  return current.type === "Identifier" ? (current.name as string) : undefined;
}

/** The `module_access_denied` error for a finding: what was refused, where, and what to use instead. */
export function moduleAccessError(finding: ModuleAccessFinding): CodeModeError {
  const message =
    `Module access is not available in a cell: ${finding.description} at line ${finding.line}:${finding.column}. ` +
    "A cell runs without a module loader, so import, export, import(), import.meta and require are refused. " +
    "Use the globals the cell is given instead (tools.call(...), MCP.<server>.<tool>(...), namespaces).";
  return new CodeModeError("module_access_denied", message, {
    line: finding.line,
    column: finding.column,
    construct: finding.construct,
    message: `${finding.description} is not allowed`,
  });
}

/**
 * Refuses module access in a JavaScript cell, before it runs. Throws `module_access_denied` at the first
 * construct found, or `invalid_input` (with line:column) when the cell does not parse: it fails closed.
 */
export function checkModuleAccess(javascript: string): void {
  checkedProgram(javascript);
}

/** The cell parsed, once checked as checkModuleAccess checks it (which throws the same errors). */
export function checkedProgram(javascript: string): Program {
  const parsed = parseCellBody(javascript);
  if (!parsed.ok) {
    const { line, column, reason } = parsed.failure;
    throw new CodeModeError(
      "invalid_input",
      `The cell does not parse as JavaScript at line ${line}:${column}: ${reason}. ` +
        "Fix the syntax and run it again (the cell is the body of an async function: top-level await and return are allowed).",
      { line, column, message: reason },
    );
  }
  const [first] = findModuleAccessInProgram(parsed.program, javascript);
  if (first !== undefined) throw moduleAccessError(first);
  return parsed.program;
}
