import { CODE_MODE_LANGUAGES, CodeModeError, type CodeModeLanguage } from "@codecell/contract/errors";
import type { Program } from "acorn";
import { type PreparedCell, resultOfLastExpression } from "./cell-result.js";
import { parseCellBody } from "./javascript-parser.js";
import { checkedProgram, findModuleAccessInProgram, moduleAccessError } from "./module-access.js";
import { loadTypeScriptTransformer, transformError } from "./typescript-transformer.js";

/**
 * Turns a model-written cell into JavaScript for the sandbox to run as the BODY of an async function
 * (top-level `await` and `return` are legal), with every line where the user wrote it.
 *
 * - JavaScript: parsed and checked for module access.
 * - TypeScript: types stripped (the transformer is loaded on the first TypeScript cell), then the
 *   produced JavaScript is parsed and checked the same way, so invalid output can never pass silently.
 *
 * Either way, a cell without a `return` of its own that ends with an expression returns that
 * expression (resultOfLastExpression); any other cell's code is the checked JavaScript as it is.
 *
 * Throws `CodeModeError`: `module_access_denied`, `invalid_input` (JavaScript that does not parse),
 * `typescript_transform_failed` (TypeScript that cannot be turned into valid JavaScript) or
 * `unsupported_language`; `details` carry `{ line, column, message }`.
 */
export async function prepareCell(source: string, language: CodeModeLanguage): Promise<PreparedCell> {
  if (typeof source !== "string") {
    throw new CodeModeError("invalid_input", `A cell must be a string of code; received ${typeof source}.`);
  }
  if (language === "javascript") {
    return resultOfLastExpression(checkedProgram(source), source);
  }
  if (language === "typescript") {
    const transformer = await loadTypeScriptTransformer();
    const javascript = transformer.transform(source);
    return resultOfLastExpression(checkProducedJavaScript(javascript), javascript);
  }
  throw new CodeModeError(
    "unsupported_language",
    `Unknown cell language ${JSON.stringify(language)}; use one of ${CODE_MODE_LANGUAGES.map((name) => JSON.stringify(name)).join(", ")}.`,
    { language: String(language), allowed: [...CODE_MODE_LANGUAGES] },
  );
}

/**
 * True when a cell that does not parse as JavaScript is TypeScript: with its types stripped it parses
 * (a module access in it counts too: that is refused later, as TypeScript). False for a cell that parses
 * as JavaScript, and for one that is neither. Loads the TypeScript transformer only for a cell that
 * failed to parse as JavaScript.
 */
export async function isTypeScriptOnly(source: string): Promise<boolean> {
  if (typeof source !== "string" || parseCellBody(source).ok) return false;
  try {
    await prepareCell(source, "typescript");
    return true;
  } catch (error) {
    return CodeModeError.is(error) && error.code === "module_access_denied";
  }
}

/**
 * The transformer keeps lines, so a line reported here is the user's line; the column is the one in the
 * produced JavaScript, which can sit left of the TypeScript column when types were removed before it.
 */
function checkProducedJavaScript(javascript: string): Program {
  const parsed = parseCellBody(javascript);
  if (!parsed.ok) {
    const { line, column, reason } = parsed.failure;
    throw transformError(
      { line, column },
      `the JavaScript produced from this TypeScript does not parse (${reason})`,
    );
  }
  const [first] = findModuleAccessInProgram(parsed.program, javascript);
  if (first !== undefined) throw moduleAccessError(first);
  return parsed.program;
}
