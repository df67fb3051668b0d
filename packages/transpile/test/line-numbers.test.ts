// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings are cells whose source contains template literals
import { Script } from "node:vm";
import type { CodeModeLanguage } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { prepareCell } from "../src/index.js";

/**
 * Evaluates prepared JavaScript as the body of an async function whose first body line is line 1 of a
 * script named cell.js, and returns the line the thrown error points at.
 */
async function lineOfThrow(javascript: string): Promise<number> {
  const cellFunction = new Script(`(async function () {${javascript}\n})`, {
    filename: "cell.js",
  }).runInThisContext();
  try {
    await cellFunction();
  } catch (error) {
    const match = /cell\.js:(\d+):\d+/.exec(String((error as Error).stack));
    if (match === null) throw new Error(`no cell.js frame in ${String((error as Error).stack)}`);
    return Number(match[1]);
  }
  throw new Error("the cell did not throw");
}

// Each cell throws on the line marked THROWS; type-only code above it must not move it.
const cells: Array<[name: string, language: CodeModeLanguage, cell: string]> = [
  [
    "plain JavaScript",
    "javascript",
    "const a = 1;\n\nconst b = 2;\n\n\nconst c = a + b;\nthrow new Error('line 7'); // THROWS",
  ],
  [
    "interfaces, aliases and annotations",
    "typescript",
    [
      "interface User {",
      "  id: number;",
      "  name: string;",
      "}",
      "type Users = User[];",
      "const users: Users = [];",
      "throw new Error(`none of ${users.length}`); // THROWS",
    ].join("\n"),
  ],
  [
    "multi-line enum and parameter properties",
    "typescript",
    [
      "enum Level {",
      "  Low,",
      "  High,",
      "}",
      "class Box {",
      "  constructor(",
      "    private readonly level: Level,",
      "    public label: string = 'x',",
      "  ) {}",
      "  open(): never { throw new Error(String(this.level)); } // THROWS",
      "}",
      "new Box(Level.High).open();",
    ].join("\n"),
  ],
  [
    "overloads, generics and a runtime TypeError",
    "typescript",
    [
      "function pick(x: string): string;",
      "function pick(x: number): number;",
      "function pick<T>(",
      "  x: T,",
      "): T { return x; }",
      "const value = pick<number>(1) as unknown as { deep: { field: number } } | null;",
      "const nothing = null as unknown as { deep: { field: number } };",
      "return nothing.deep.field + (value === null ? 0 : 1); // THROWS",
    ].join("\n"),
  ],
  [
    "declare, abstract and satisfies",
    "typescript",
    [
      "declare const injected: {",
      "  value: number;",
      "};",
      "abstract class Base {",
      "  abstract run(): void;",
      "}",
      "const config = { retries: 2 } satisfies Record<string, number>;",
      "class Impl extends Base { run(): void { throw new RangeError(`retries ${config.retries}`); } } // THROWS",
      "new Impl().run();",
    ].join("\n"),
  ],
];

describe("line numbers", () => {
  it("keeps lines of a TypeScript cell written with \\r\\n line ends", async () => {
    const cell = [
      "interface A {",
      "  x: number;",
      "}",
      "enum E {",
      "  One,",
      "}",
      "throw new Error('seven');",
    ].join("\r\n");
    const javascript = (await prepareCell(cell, "typescript")).code;
    expect(javascript.split(/\r\n|\n/)).toHaveLength(7);
    expect(await lineOfThrow(javascript)).toBe(7);
  });

  it("reports a TypeScript syntax error at the user's line", async () => {
    const cell = "interface A {\n  x: number;\n}\n\nconst a: A = { x: 1 };\n\nconst broken = (a.x +;\n";
    await expect(prepareCell(cell, "typescript")).rejects.toMatchObject({
      code: "typescript_transform_failed",
      details: { line: 7 },
    });
  });

  it.each(cells)("an error in %s reports the user's line", async (_name, language, cell) => {
    const expectedLine = cell.split("\n").findIndex((line) => line.includes("// THROWS")) + 1;
    expect(expectedLine).toBeGreaterThan(1);
    expect(await lineOfThrow((await prepareCell(cell, language)).code)).toBe(expectedLine);
  });
});
