import type { CodeModeLanguage } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { prepareCell } from "../src/index.js";
import { rejection, runAsCellBody } from "./support.js";

// TypeScript a model writes, with what the cell must return once transformed and run.
const typescriptAccepted: Array<[name: string, cell: string, expected: unknown]> = [
  ["angle-bracket const cast", "const a = <const>[1, 2];\nreturn a;", [1, 2]],
  ["angle-bracket cast of a value", "const v: unknown = 5;\nreturn (<number>v) + 1;", 6],
  ["as const", "const a = [1, 2] as const;\nreturn a.length;", 2],
  ["satisfies", "const a = { x: 1 } satisfies Record<string, number>;\nreturn a.x;", 1],
  ["enum with auto values", "enum E {\n  A,\n  B = 5,\n  C,\n}\nreturn [E.A, E.C, E[5]];", [0, 6, "B"]],
  ["string enum", 'enum Color { Red = "red", Blue = "blue" }\nreturn Color.Blue;', "blue"],
  ["const enum", "const enum Flag { On = 1 }\nreturn Flag.On;", 1],
  ["generic arrow with trailing comma", "const id = <T,>(x: T): T => x;\nreturn id(3);", 3],
  ["generic arrow", "const id = <T>(x: T) => x;\nreturn id('a');", "a"],
  ["async generic arrow", "const f = async <T>(x: T): Promise<T> => x;\nreturn await f(7);", 7],
  [
    "generic call and new",
    "const m = new Map<string, number>([['a', 1]]);\nreturn Array.from<number>(m.values());",
    [1],
  ],
  ["declare statements", "declare const injected: number;\ndeclare function f(): void;\nreturn 1;", 1],
  ["declare global", "declare global {\n  interface Window { x: number }\n}\nreturn 2;", 2],
  ["declare class field", "class A { declare x: number; y = 2 }\nreturn new A().y;", 2],
  ["non-null assertion", "const a: { b?: number } = { b: 1 };\nreturn a.b! + 1;", 2],
  ["definite assignment", "let z!: number;\nz = 4;\nreturn z;", 4],
  ["optional chaining and nullish", "const a: any = {};\nreturn a?.b?.c ?? 3;", 3],
  [
    "interface and type alias",
    "interface I {\n  x: number;\n}\ntype T = I | string;\nconst v: T = { x: 9 };\nreturn v.x;",
    9,
  ],
  [
    "abstract class",
    "abstract class A {\n  abstract f(): number;\n  g() { return this.f() * 2; }\n}\nclass B extends A { f() { return 2; } }\nreturn new B().g();",
    4,
  ],
  [
    "parameter properties",
    "class P {\n  constructor(private readonly x: number, public y = 2) {}\n  sum() { return this.x + this.y; }\n}\nreturn new P(1).sum();",
    3,
  ],
  [
    "overloads",
    "function f(a: string): string;\nfunction f(a: number): number;\nfunction f(a: any) { return a; }\nreturn f(5);",
    5,
  ],
  [
    "class modifiers",
    "class A { private p = 1; protected q = 2; static readonly r = 3; override toString() { return 'a'; } }\nreturn String(new A());",
    "a",
  ],
  [
    "index signature and optional method",
    "class B { [k: string]: unknown; f?(): void; }\nreturn typeof new B();",
    "object",
  ],
  [
    "private fields and static blocks",
    "class A { #y = 2; static z: number; static { A.z = 3; } get y() { return this.#y; } }\nreturn new A().y + A.z;",
    5,
  ],
  ["this parameter", "function f(this: { v: number }) { return this.v; }\nreturn f.call({ v: 8 });", 8],
  [
    "type predicates",
    "function isNum(x: unknown): x is number { return typeof x === 'number'; }\nreturn isNum(1);",
    true,
  ],
  [
    "assertion function",
    "function check(x: unknown): asserts x is string {}\ncheck('s');\nreturn 'ok';",
    "ok",
  ],
  ["top-level await and return", "const x: number = await Promise.resolve(1);\nreturn x + 1;", 2],
  ["words in strings", "const s: string = \"import x from 'y'\";\nreturn s.length > 0;", true],
  ["typeof in a type", "const o = { a: 1 };\ntype O = typeof o;\nconst p: O = { a: 2 };\nreturn p.a;", 2],
  [
    "tools call",
    "const r: unknown = await Promise.resolve({ ok: true });\nreturn r as { ok: boolean };",
    { ok: true },
  ],
];

// Erased types must not join two statements into one (TypeScript's own reading, checked against
// typescript 5.9 transpileModule, is the expected value).
const statementBoundaries: Array<[name: string, cell: string, expected: unknown]> = [
  ["as cast before a parenthesised line", "const b = 1;\nconst a = b as number\n(globalThis)\nreturn a;", 1],
  ["satisfies before an array line", "const b = [1];\nconst a = b satisfies number[]\n[0]\nreturn a;", [1]],
  ["annotation before a parenthesised line", "let x: number\n(globalThis)\nx = 2;\nreturn x;", 2],
  ["type alias before a parenthesised line", "const a = 1\ntype T = number\n(globalThis)\nreturn a;", 1],
  [
    "interface before an array line",
    "const a = 1\ninterface I { x: number }\n[1, 2].forEach(() => {})\nreturn a;",
    1,
  ],
  ["declare before a parenthesised line", "const a = 1\ndeclare const z: number\n(globalThis)\nreturn a;", 1],
  [
    "overload before a parenthesised line",
    "const a = 1\nfunction f(x: string): void\nfunction f(x: any) { return x; }\n(globalThis)\nreturn a;",
    1,
  ],
  [
    "annotated class field before a computed one",
    "const k = 'k';\nclass A { x: number\n[k] = 1 }\nreturn new A().k;",
    1,
  ],
  ["as cast before a template line", "const b = 'x';\nconst a = b as string\n`t`\nreturn a;", "x"],
  ["prefix cast of the next line stays one expression", "const x = <number>\n(1 + 1);\nreturn x;", 2],
  [
    "as cast followed by a binary operator line stays one expression",
    "const a = 1 as number\n+ 2;\nreturn a;",
    3,
  ],
];

// TypeScript that must be refused, with the code and the user's line.
const typescriptRefused: Array<[name: string, cell: string, code: string, line: number, text: RegExp]> = [
  [
    "type-only import",
    "const a = 1;\nimport type { X } from 'y';\nreturn a;",
    "module_access_denied",
    2,
    /type-only import/,
  ],
  ["inline type import", "import { type X } from 'y';", "module_access_denied", 1, /import/],
  ["value import", "import fs from 'fs';", "module_access_denied", 1, /import declaration/],
  ["import equals require", "import fs = require('fs');", "module_access_denied", 1, /import/],
  [
    "import type in a type position",
    "let s: import('fs').Stats;\nreturn 1;",
    "module_access_denied",
    1,
    /import/,
  ],
  ["dynamic import", "const m = await import('fs');", "module_access_denied", 1, /dynamic import/],
  ["import.meta", "const u: string = import.meta.url;", "module_access_denied", 1, /import\.meta/],
  ["require call", "const x: any = require('fs');", "module_access_denied", 1, /require/],
  ["export interface", "export interface Q { a: 1 }", "module_access_denied", 1, /export/],
  ["export type", "type A = 1;\nexport type { A };", "module_access_denied", 2, /export/],
  ["export assignment", "export = 1;", "module_access_denied", 1, /export/],
  [
    "namespace with values",
    "namespace N {\n  export const x = 1;\n}\nreturn N.x;",
    "typescript_transform_failed",
    1,
    /namespace/,
  ],
  ["module declaration", "\nmodule M { }", "typescript_transform_failed", 2, /namespace/],
  [
    "class decorator",
    "function d(t: any) {}\n@d\nclass A {}",
    "typescript_transform_failed",
    2,
    /decorators/,
  ],
  ["method decorator", "class A {\n  @log m() {}\n}", "typescript_transform_failed", 2, /decorators/],
  ["syntax error", "const a = 1;\nconst x: = 3;", "typescript_transform_failed", 2, /Unexpected token/],
  ["unclosed call", "function f( {", "typescript_transform_failed", 1, /expected/],
  ["auto accessor", "class A {\n  accessor x = 1;\n}", "typescript_transform_failed", 2, /does not parse/],
  ["absurd nesting", "(".repeat(50_000), "typescript_transform_failed", 1, /nested too deeply/],
];

describe("prepareCell for TypeScript", () => {
  it.each(typescriptAccepted)(
    "transforms %s into valid JavaScript with the same lines",
    async (_name, cell, expected) => {
      const javascript = (await prepareCell(cell, "typescript")).code;
      expect(javascript.split("\n")).toHaveLength(cell.split("\n").length);
      expect(await runAsCellBody(javascript)).toEqual(expected);
    },
  );

  it.each(statementBoundaries)("keeps statements apart: %s", async (_name, cell, expected) => {
    const javascript = (await prepareCell(cell, "typescript")).code;
    expect(javascript.split("\n")).toHaveLength(cell.split("\n").length);
    expect(await runAsCellBody(javascript)).toEqual(expected);
  });

  it.each(typescriptRefused)("refuses %s", async (_name, cell, code, line, text) => {
    const error = await rejection(() => prepareCell(cell, "typescript"));
    expect(error.code).toBe(code);
    expect(error.details).toMatchObject({ line });
    expect(error.message).toMatch(text);
    expect(error.message).toContain(`line ${line}:`);
  });

  it("keeps working after a cell that exhausted the parser's stack", async () => {
    await rejection(() => prepareCell("[".repeat(50_000), "typescript"));
    expect(
      await runAsCellBody((await prepareCell("const n: number = 2;\nreturn n;", "typescript")).code),
    ).toBe(2);
  });
});

describe("prepareCell for JavaScript", () => {
  it("returns the cell unchanged", async () => {
    const cell = "const v = await Promise.resolve(2);\n// import is only a word here\nreturn v;";
    expect(await prepareCell(cell, "javascript")).toEqual({ code: cell, inserted: null });
  });

  it("refuses module access", async () => {
    const error = await rejection(() => prepareCell("\nconst fs = require('fs');", "javascript"));
    expect(error.code).toBe("module_access_denied");
    expect(error.details).toMatchObject({ line: 2, column: 12, construct: "require" });
  });

  it("fails closed with invalid_input, never typescript_transform_failed", async () => {
    const error = await rejection(() => prepareCell("const x: number = 1;", "javascript"));
    expect(error.code).toBe("invalid_input");
    expect(error.details).toMatchObject({ line: 1, column: 8 });
  });
});

describe("prepareCell input checks", () => {
  it("refuses an unknown language with the allowed ones", async () => {
    const error = await rejection(() => prepareCell("return 1", "python" as CodeModeLanguage));
    expect(error.code).toBe("unsupported_language");
    expect(error.message).toContain('"javascript", "typescript"');
  });

  it("refuses a cell that is not a string", async () => {
    const error = await rejection(() => prepareCell(42 as unknown as string, "javascript"));
    expect(error.code).toBe("invalid_input");
  });
});
