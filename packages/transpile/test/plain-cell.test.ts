// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings are cells whose source contains template literals
import { CodeModeError } from "@codecell/contract";
import { parse } from "acorn";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { resultOfLastExpression } from "../src/cell-result.js";
import { checkModuleAccess } from "../src/index.js";
import { isPlainJavaScriptCell } from "../src/plain-cell.js";
import { staysOneFunction } from "./support.js";

/** The cell parsed as a cell body, or null when it does not parse. */
function parsedCell(cell: string): ReturnType<typeof parse> | null {
  try {
    return parse(cell, {
      ecmaVersion: "latest",
      sourceType: "script",
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
    });
  } catch {
    return null;
  }
}

/** The code the full check refuses the cell with, or null when it accepts it. */
function fullCheckCode(cell: string): string | null {
  try {
    checkModuleAccess(cell);
    return null;
  } catch (error) {
    if (CodeModeError.is(error)) return error.code;
    throw error;
  }
}

describe("isPlainJavaScriptCell", () => {
  it.each([
    "return 1 + 1",
    "const r = await tools.call('x', { a: [1, 2] });\nreturn r.items.filter((i) => i.n > 3);",
    "// a comment with ) ] } in it\nreturn { a: `x${1 + `y${2}`}z` };",
    "/* block ) } */ return 'it\\'s \"quoted\" \\n\\t\\\\';",
    "return `price: \\${x}`;",
    "const s = 'a\\0';\r\nreturn s.length;",
  ])("takes an ordinary cell without the parser: %j", (cell) => {
    expect(isPlainJavaScriptCell(cell)).toBe(true);
    expect(fullCheckCode(cell)).toBeNull();
  });

  it.each([
    ["a module word anywhere, even in a comment", "// import later\nreturn 1"],
    ["require in a string", "return globalThis['require']"],
    ["an escape that spells a letter", "return globalThis['r\\equire']"],
    ["a unicode escape in a string", "return globalThis['\\u0072equire']"],
    ["a hex escape", "return globalThis['\\x72equire']"],
    ["an octal escape", "return '\\162'"],
    ["a line continuation", "return 'req\\\nuire'"],
    ["an escape outside a literal", "const \\u0061 = 1; return a"],
    ["a division", "return 4 / 2"],
    ["a regex", "return /x/.test('x')"],
    ["an HTML-like comment", "return 1 <!-- 2"],
    ["an HTML-like closing comment", "x\n--> }"],
    ["a lone carriage return", "// c\r}); (function () {"],
    ["a line separator", "// c\u2028}); (function () {"],
    ["the function closed early", "}); globalThis.x = 1; (function () {"],
    ["a bracket closed in the wrong order", "return [1, (2]);"],
    ["an unclosed bracket", "return [1, 2"],
    ["an unclosed string", "return 'abc"],
    ["an unclosed template", "return `abc${1}"],
    ["an unclosed block comment", "return 1 /* note"],
    ["a string across a line", "return 'a\nb'"],
    ["a cell without a return", "const a = 1;\na + 1"],
    ["a cell whose return is in a block", "if (x) { return 1 }\n2"],
    ["a cell whose return is in a function", "[1].map((n) => { return n })"],
    ["a return that is a property name", "x.return"],
    ["a return that is a property name after a space", "x. return"],
    ["a word that starts with return", "returned"],
    ["a word that ends with return", "noreturn"],
  ])("sends %s to the full check", (_name, cell) => {
    expect(isPlainJavaScriptCell(cell)).toBe(false);
  });

  it("never passes a cell the full check refuses for module access, one that leaves its function, or one whose last expression is its result", () => {
    const pieces = [
      "import",
      "impo",
      "rt",
      "require",
      "req",
      "uire",
      "export",
      "(",
      ")",
      "{",
      "}",
      "[",
      "]",
      "`",
      "${",
      "'",
      '"',
      "\\",
      "\\u0072",
      "\\x72",
      "\\e",
      "\\n",
      "//",
      "/*",
      "*/",
      "/",
      "\n",
      "\r",
      "\r\n",
      "\u2028",
      "<!--",
      "-->",
      ";",
      " ",
      "x",
      "globalThis",
      ".",
      "function",
      "})",
      "(function () {",
      "x = 1;",
      "return ",
      "return",
      "returned",
      "=>",
      "1",
      "0",
      ",",
    ];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 24 }), (parts) => {
        const cell = parts.join("");
        if (!isPlainJavaScriptCell(cell)) return;
        expect(fullCheckCode(cell)).not.toBe("module_access_denied");
        expect(staysOneFunction(cell)).not.toBe(false);
        const program = parsedCell(cell);
        if (program !== null) expect(resultOfLastExpression(program, cell).inserted).toBeNull();
      }),
      { numRuns: 20_000 },
    );
  });
});
