import type { Node } from "acorn";
import { parseCellBody } from "./javascript-parser.js";

/**
 * Where a runtime TypeError happened, in source terms. QuickJS says only `not a function` or `cannot read
 * property 'x' of undefined` with a line and column; this finds the one expression the message can be
 * about, so the model reads `t.split is not a function` as V8 would say it.
 */
export type RuntimeErrorSite =
  | {
      /** A call or `new` whose callee is not a function. */
      kind: "not_a_function";
      /** The callee as written, such as `tools.read_files` or `t.split`. */
      expression: string;
      /** The callee as a dotted path of plain names (`["tools", "read_files"]`), when it is one. */
      path: string[] | null;
    }
  | {
      /** A member read or write on `undefined` or `null`. */
      kind: "member_of_nothing";
      /** The expression that was undefined or null, such as `MCP.memroy`. */
      expression: string;
      path: string[] | null;
      /** The member it tried to read. */
      property: string;
    };

/** How a plain variable got its value, when a single declaration says so. */
export type BindingOrigin = {
  /** The called function as a dotted path (`["tools", "read_file"]`), for `const t = await f(...)`. */
  calleePath: string[];
  /** The first argument when it is a string literal (the tool id of `tools.call("id", ...)`). */
  firstArgument: string | null;
  /** False for `const t = f(...)` without `await`: the name then holds what the call returned as is. */
  awaited: boolean;
};

type AnyNode = Node & Record<string, unknown>;

function isNode(value: unknown): value is AnyNode {
  return (
    typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string"
  );
}

function visit(node: AnyNode, enter: (node: AnyNode) => void): void {
  const stack: AnyNode[] = [node];
  while (stack.length > 0) {
    const current = stack.pop()!;
    enter(current);
    for (const key of Object.keys(current)) {
      if (key === "type" || key === "start" || key === "end") continue;
      const value = current[key];
      if (Array.isArray(value)) {
        for (const item of value) if (isNode(item)) stack.push(item);
      } else if (isNode(value)) stack.push(value);
    }
  }
}

/** The UTF-16 offset of a 1-based line and column, or -1 when the cell has no such place. */
function offsetOf(source: string, line: number, column: number): number {
  let offset = 0;
  for (let current = 1; current < line; current++) {
    const next = source.indexOf("\n", offset);
    if (next < 0) return -1;
    offset = next + 1;
  }
  const end = source.indexOf("\n", offset);
  const lineLength = (end < 0 ? source.length : end) - offset;
  if (column < 1 || column - 1 > lineLength) return -1;
  return offset + column - 1;
}

/** `a.b.c` as `["a", "b", "c"]`; `a["b"]` counts too; anything else (calls, computed keys) is null. */
export function dottedPath(node: AnyNode): string[] | null {
  if (node.type === "Identifier") return [node.name as string];
  if (node.type === "ThisExpression") return ["this"];
  if (node.type !== "MemberExpression") return null;
  const object = dottedPath(node.object as AnyNode);
  if (object === null) return null;
  const property = node.property as AnyNode;
  if (!node.computed && property.type === "Identifier") return [...object, property.name as string];
  if (node.computed && property.type === "Literal" && typeof property.value === "string") {
    return [...object, property.value];
  }
  return null;
}

function propertyName(node: AnyNode): string | null {
  const property = node.property as AnyNode;
  if (!node.computed && property.type === "Identifier") return property.name as string;
  if (
    property.type === "Literal" &&
    (typeof property.value === "string" || typeof property.value === "number")
  ) {
    return String(property.value);
  }
  return null;
}

const NOT_A_FUNCTION = /^not a function$|is not a function$/;
const MEMBER_OF_NOTHING = /^cannot (?:read|set) property '([^']*)' of (?:undefined|null)$/;

/**
 * The expression a QuickJS TypeError is about, from the JavaScript that ran and the error's place
 * (1-based line and column). Null when the message is of another kind or when more than one expression
 * there could be meant: a wrong name is worse than none.
 */
export function findRuntimeErrorSite(
  javascript: string,
  error: { message: string; line: number; column: number },
): RuntimeErrorSite | null {
  const wantsCall = NOT_A_FUNCTION.test(error.message);
  const member = MEMBER_OF_NOTHING.exec(error.message);
  if (!wantsCall && !member) return null;
  const offset = offsetOf(javascript, error.line, error.column);
  if (offset < 0) return null;
  const parsed = parseCellBody(javascript);
  if (!parsed.ok) return null;
  const program = parsed.program as unknown as AnyNode;
  const text = (node: AnyNode) => javascript.slice(node.start, node.end);

  if (wantsCall) {
    // The innermost call whose callee covers the place (or ends right before it, at its parenthesis).
    let best: AnyNode | null = null;
    let tie = false;
    visit(program, (node) => {
      if (node.type !== "CallExpression" && node.type !== "NewExpression") return;
      const callee = node.callee as AnyNode;
      if (offset < callee.start || offset > callee.end) return;
      if (best === null || callee.end - callee.start < best.end - best.start) {
        best = callee;
        tie = false;
      } else if (callee.end - callee.start === best.end - best.start && callee !== best) tie = true;
    });
    if (best === null || tie) return null;
    const callee: AnyNode = best;
    return { kind: "not_a_function", expression: text(callee), path: dottedPath(callee) };
  }

  // The member read of that property whose expression covers the place: exactly one, or no answer.
  const wanted = member![1]!;
  const matches: AnyNode[] = [];
  visit(program, (node) => {
    if (node.type !== "MemberExpression") return;
    if (offset < node.start || offset >= node.end || propertyName(node) !== wanted) return;
    matches.push(node);
  });
  if (matches.length !== 1) return null;
  const object = matches[0]!.object as AnyNode;
  return { kind: "member_of_nothing", expression: text(object), path: dottedPath(object), property: wanted };
}

/** True when a binding pattern (`t`, `{ t }`, `[a, ...t]`, `t = 1`) binds `name`. */
function patternBinds(pattern: AnyNode | null | undefined, name: string): boolean {
  if (!pattern) return false;
  switch (pattern.type) {
    case "Identifier":
      return pattern.name === name;
    case "ObjectPattern":
      return (pattern.properties as AnyNode[]).some((property) =>
        patternBinds(property.type === "RestElement" ? property : (property.value as AnyNode), name),
      );
    case "ArrayPattern":
      return (pattern.elements as Array<AnyNode | null>).some((element) => patternBinds(element, name));
    case "RestElement":
      return patternBinds(pattern.argument as AnyNode, name);
    case "AssignmentPattern":
      return patternBinds(pattern.left as AnyNode, name);
    default:
      return false;
  }
}

/**
 * What the single declaration of `name` in the cell assigns: `const t = await tools.read_file(...)` gives
 * `tools.read_file`. Null when the name is bound or assigned anywhere else in the cell (another
 * declaration, a parameter or destructured parameter of any function, a catch clause, an assignment or
 * `++`), or not from a call: the name must mean one value everywhere, or no answer.
 */
export function findBindingOrigin(javascript: string, name: string): BindingOrigin | null {
  const parsed = parseCellBody(javascript);
  if (!parsed.ok) return null;
  let origin: BindingOrigin | null = null;
  let writes = 0;
  visit(parsed.program as unknown as AnyNode, (node) => {
    if (node.type === "VariableDeclarator") {
      const id = node.id as AnyNode;
      if (!patternBinds(id, name)) return;
      writes++;
      if (id.type !== "Identifier") return;
      let init = node.init as AnyNode | null;
      const awaited = init?.type === "AwaitExpression";
      if (awaited) init = init!.argument as AnyNode;
      if (init?.type !== "CallExpression") return;
      const calleePath = dottedPath(init.callee as AnyNode);
      if (calleePath === null) return;
      const first = (init.arguments as AnyNode[])[0];
      origin = {
        calleePath,
        firstArgument: first?.type === "Literal" && typeof first.value === "string" ? first.value : null,
        awaited,
      };
    } else if (node.type === "AssignmentExpression") {
      if (patternBinds(node.left as AnyNode, name)) writes++;
    } else if (node.type === "UpdateExpression") {
      if (patternBinds(node.argument as AnyNode, name)) writes++;
    } else if (node.type === "ClassDeclaration" || node.type === "ClassExpression") {
      if ((node.id as AnyNode | null)?.name === name) writes++;
    } else if (
      node.type === "FunctionDeclaration" ||
      node.type === "FunctionExpression" ||
      node.type === "ArrowFunctionExpression"
    ) {
      // A function or parameter of the same name is another binding: the name no longer means one value.
      if ((node.id as AnyNode | null)?.name === name) writes++;
      for (const param of node.params as AnyNode[]) if (patternBinds(param, name)) writes++;
    } else if (node.type === "CatchClause") {
      if (patternBinds(node.param as AnyNode | null, name)) writes++;
    } else if (node.type === "ImportSpecifier" || node.type === "ImportDefaultSpecifier") {
      if ((node.local as AnyNode).name === name) writes++;
    }
  });
  return writes === 1 ? origin : null;
}
