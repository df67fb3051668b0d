import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { prepareCell } from "../src/index.js";
import { runAsCellBody, staysOneFunction } from "./support.js";

/** The offset at which 1-based `line` of `text` starts (\r\n and \n end lines). */
function lineStart(text: string, line: number): number {
  let offset = 0;
  for (let current = 1; current < line; current++) offset = text.indexOf("\n", offset) + 1;
  return offset;
}

describe("a cell's last expression as its result", () => {
  it.each([
    ["a bare expression", "1 + 1", "0;return (1 + 1)", { line: 1, column: 1 }, 2],
    [
      "after statements",
      "const a = 2;\n  a * 3;",
      "const a = 2;\n  0;return (a * 3);",
      { line: 2, column: 3 },
      6,
    ],
    ["with a comment after it", "7 // seven", "0;return (7) // seven", { line: 1, column: 1 }, 7],
    [
      "an async arrow, called",
      "async () => {\n  return 5;\n}",
      "0;return (async () => {\n  return 5;\n})()",
      { line: 1, column: 1 },
      5,
    ],
    [
      "a function expression in parentheses, called",
      "(function () { return 'f' });",
      "0;return ((function () { return 'f' }))();",
      { line: 1, column: 1 },
      "f",
    ],
    [
      "an arrow called at once",
      "(async () => 4)()",
      "0;return ((async () => 4)())",
      { line: 1, column: 1 },
      4,
    ],
    [
      "a call of a declared function",
      "function main() { return 9 }\nmain()",
      "function main() { return 9 }\n0;return (main())",
      { line: 2, column: 1 },
      9,
    ],
    ["a sequence", "1, 2, 3", "0;return (1, 2, 3)", { line: 1, column: 1 }, 3],
    [
      "a statement on the same line before it",
      "const o = { a: 1 }; o.a",
      "const o = { a: 1 }; 0;return (o.a)",
      { line: 1, column: 21 },
      1,
    ],
  ])("%s", async (_name, cell, code, at, value) => {
    const prepared = await prepareCell(cell, "javascript");
    expect(prepared).toEqual({ code, inserted: { ...at, length: "0;return (".length } });
    expect(await runAsCellBody(prepared.code)).toEqual(value);
  });

  it.each([
    ["a cell with a return", "const a = 1;\nreturn a"],
    ["a return in a branch", "if (Math.random() > 2) return 1;\n2"],
    [
      "a return in a block, a loop, a try and a switch",
      "for (;;) { try { switch (1) { case 1: return 1 } } finally {} }\n2",
    ],
    ["a declaration last", "function f() { return 1 }"],
    ["a directive", "'use strict'"],
    ["an empty cell", ""],
    ["a cell of comments", "// nothing to do"],
  ])("leaves %s as written", async (_name, cell) => {
    expect(await prepareCell(cell, "javascript")).toEqual({ code: cell, inserted: null });
  });

  it("does not call a function that takes parameters, or a generator", async () => {
    for (const cell of ["async (input) => input", "(function* () { yield 1 })"]) {
      const prepared = await prepareCell(cell, "javascript");
      expect(prepared.code, cell).toBe(`0;return (${cell})`);
    }
  });

  it("gives a TypeScript cell's last expression as its result", async () => {
    const prepared = await prepareCell("const n: number = 4;\nn as number * 2", "typescript");
    expect(prepared.inserted).toEqual({ line: 2, column: 1, length: 10 });
    expect(await runAsCellBody(prepared.code)).toBe(8);
  });

  it("never lets a rewritten cell leave the function it is the body of, whatever it ends with", async () => {
    const pieces = [
      "x",
      "1",
      "(",
      ")",
      "{",
      "}",
      "[",
      "]",
      ";",
      "\n",
      " ",
      ",",
      "=>",
      "async",
      "function",
      "`",
      "${",
      "'",
      '"',
      "//",
      "/*",
      "*/",
      "/",
      "})",
      "(function () {",
      "--",
      "-->",
      "<!--",
      "+",
      "?.",
      ".",
      "a:",
      "yield",
      "await ",
    ];
    let rewritten = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...pieces), { maxLength: 16 }), async (parts) => {
        const cell = parts.join("");
        const prepared = await prepareCell(cell, "javascript").catch(() => null);
        if (prepared === null || prepared.inserted === null) return;
        rewritten += 1;
        // Never a way out of the function; and a cell that ran as written still runs once rewritten.
        expect(staysOneFunction(prepared.code), JSON.stringify(cell)).not.toBe(false);
        if (staysOneFunction(cell) === true)
          expect(staysOneFunction(prepared.code), JSON.stringify(cell)).toBe(true);
      }),
      { numRuns: 5_000 },
    );
    expect(rewritten).toBeGreaterThan(100);
  });

  it("moves no line, and changes only the result's line, where its text is inserted", async () => {
    const statements = [
      "const a = 1;",
      "let b = [a, 2]",
      "// a comment",
      "/* a block\ncomment */",
      "if (a) { b.push(3) }",
      "function f() { return b.length }",
      "",
      "  ",
    ];
    let rewritten = 0;
    const endings = [
      "b.length",
      "f()",
      "(a + 1)",
      "async () => b",
      "b.map((x) => x * 2);",
      "a\n  + 1",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the cell ends with a template literal
      "`t${a}`",
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.shuffledSubarray(statements, { maxLength: 6 }),
        fc.constantFrom(...endings),
        fc.constantFrom("\n", " ", "\r\n"),
        async (before, ending, separator) => {
          const cell = [...before, ending].join(separator);
          // A line comment before the rest, with a space between, can leave a cell that does not parse.
          const prepared = await prepareCell(cell, "javascript").catch(() => null);
          if (prepared === null) return;
          const inserted = prepared.inserted;
          // A statement without its `;` can swallow the ending (`[a, 2]\n(a + 1)` is a call), and a
          // line comment can too with a space between: then the cell ends with no expression.
          if (inserted === null) return;
          rewritten += 1;
          const lines = cell.split(/\r\n|\n/);
          expect(prepared.code.split(/\r\n|\n/)).toHaveLength(lines.length);
          // The opening text stands at the reported place, and taking it and then the closing text out
          // gives the cell back: nothing else was touched.
          const offset = lineStart(cell, inserted.line) + inserted.column - 1;
          expect(prepared.code.slice(offset, offset + inserted.length)).toBe("0;return (");
          const opened = prepared.code.slice(0, offset) + prepared.code.slice(offset + inserted!.length);
          let differs = 0;
          while (differs < cell.length && opened[differs] === cell[differs]) differs += 1;
          const closing = opened.startsWith(")()", differs) ? ")()" : ")";
          expect(opened.slice(0, differs) + opened.slice(differs + closing.length)).toBe(cell);
        },
      ),
      { numRuns: 300 },
    );
    expect(rewritten).toBeGreaterThan(100);
  });
});
