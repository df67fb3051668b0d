import type { Expression, Node, Program } from "acorn";
import { locationAt } from "./source-location.js";

/**
 * A checked cell, ready for the sandbox to run as the body of an async function.
 *
 * `code` is that body. `inserted` is null when it holds the cell's text as written (for TypeScript, as
 * transformed); otherwise `length` characters were inserted on line `line` before column `column` (both
 * 1-based), so that the columns of that line from there on sit `length` to the right of where the user
 * wrote them. No line ever moves.
 */
export type PreparedCell = {
  code: string;
  inserted: { line: number; column: number; length: number } | null;
};

const SEMICOLON = 0x3b;

/**
 * What goes before a cell's last expression to make it the cell's result. QuickJS places an error in an
 * expression it keeps no position for (`null.x`) at the last statement it keeps one for, and a `return`
 * statement keeps none: the `0;` is an expression statement, standing where the user's expression
 * stood, so such an error is placed there and not at an earlier line. It cannot join the statement
 * before: the parser found the expression a statement of its own, so that one had ended.
 */
const RESULT_OPENING = "0;return (";

/**
 * A model often ends a cell with the value it wants instead of returning it: a bare expression
 * (`x.map((t) => t.id)`, `await tools.search("x")`), a call of the function it wrote (`main()`), an
 * async function it never called (`async () => { ... }`, the shape other code-mode runtimes ask for) or
 * such a function called at once (`(async () => { ... })()`). As written, the cell's async function
 * returns nothing and the run completes with `null`, the function form without even running.
 *
 * When the cell has no `return` of its own outside nested functions and its last statement is an
 * expression, that expression becomes its result: `0;return (EXPR)`, and a function without parameters
 * is called, `0;return (EXPR)()`, so its body runs and its result is the cell's. A cell with a `return`
 * anywhere at its top level (even in a branch) is left exactly as written: a missing value there is the
 * model's choice.
 *
 * The text goes right before the expression, on its line: QuickJS places some errors in an expression
 * at the statement holding it, so the `return` must stand where the expression stood. What the
 * insertion moves on that line is reported in `inserted`, for the sandbox to give the user's columns.
 */
export function resultOfLastExpression(program: Program, javascript: string): PreparedCell {
  const unchanged = { code: javascript, inserted: null };
  const statements = program.body;
  const last = statements.at(-1);
  if (last === undefined || last.type !== "ExpressionStatement") return unchanged;
  // A directive ("use strict") is a statement for the parser, not a value the model asked for.
  if (typeof (last as { directive?: unknown }).directive === "string") return unchanged;
  if (statements.some(holdsReturn)) return unchanged;
  const close = isCallableWithoutArguments(last.expression) ? ")()" : ")";
  // The statement's range, not the expression's: it holds the parentheses around the expression, which
  // the parser leaves out of it, and its own `;` at the end, which the closing text must precede.
  const start = last.start;
  const end = javascript.charCodeAt(last.end - 1) === SEMICOLON ? last.end - 1 : last.end;
  const code =
    javascript.slice(0, start) +
    RESULT_OPENING +
    javascript.slice(start, end) +
    close +
    javascript.slice(end);
  const { line, column } = locationAt(javascript, start);
  return { code, inserted: { line, column, length: RESULT_OPENING.length } };
}

/** An arrow or function expression that takes no parameter: the cell means its body. */
function isCallableWithoutArguments(expression: Expression): boolean {
  return (
    (expression.type === "ArrowFunctionExpression" || expression.type === "FunctionExpression") &&
    expression.params.length === 0 &&
    expression.generator !== true
  );
}

/**
 * Whether a statement holds a `return` of the cell itself: in it or in a statement nested in it, never
 * in a function or class body (those return from themselves). Returns stand only in statement places,
 * so only statements are walked; each is visited once, so the walk is bounded by the cell's size.
 */
function holdsReturn(statement: Node): boolean {
  const pending: Node[] = [statement];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    const current = node as import("acorn").Statement;
    switch (current.type) {
      case "ReturnStatement":
        return true;
      case "BlockStatement":
        pending.push(...current.body);
        break;
      case "IfStatement":
        pending.push(current.consequent);
        if (current.alternate) pending.push(current.alternate);
        break;
      case "ForStatement":
      case "ForInStatement":
      case "ForOfStatement":
      case "WhileStatement":
      case "DoWhileStatement":
      case "LabeledStatement":
      case "WithStatement":
        pending.push(current.body);
        break;
      case "TryStatement":
        pending.push(current.block);
        if (current.handler) pending.push(current.handler.body);
        if (current.finalizer) pending.push(current.finalizer);
        break;
      case "SwitchStatement":
        for (const branch of current.cases) pending.push(...branch.consequent);
        break;
      default:
        break;
    }
  }
  return false;
}
