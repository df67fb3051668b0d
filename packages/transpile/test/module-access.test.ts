// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings are cells whose source contains template literals
import { CodeModeError } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { checkModuleAccess, type ModuleAccessConstruct } from "../src/index.js";

// Honest code that mentions the words in every place that is not module access.
const accepted: Array<[name: string, cell: string]> = [
  ["word in a string", `return "import x from 'y'; require('fs')";`],
  ["word in a single-quoted string", `const s = 'export default 1'; return s;`],
  ["template literal", "return `import ${'fs'} and require('x') and import('y')`;"],
  ["tagged template", "const tag = (parts) => parts.join(''); return tag`require(${1})`;"],
  ["regex literal", "return /import\\s+\\w+\\s+from|require\\(/.test('a');"],
  ["regex after return", "return /export default/;"],
  ["line comment", "// import fs from 'fs'\nreturn 1;"],
  ["block comment", "/* require('child_process'); import('x') */ return 2;"],
  ["identifier containing import", "const important = 1; return important;"],
  ["identifier containing require", "const requireAuth = () => true; return requireAuth();"],
  ["identifier containing export", "const exported = [1]; return exported;"],
  ["member call named require", "const loader = { require: (x) => x }; return loader.require('fine');"],
  ["computed member call named require", "const o = { require: () => 3 }; return o['require']();"],
  [
    "this.require method",
    "class A { require() { return 1 } run() { return this.require() } } return new A().run();",
  ],
  ["member named import", "const o = { import: 1, export: 2 }; return o.import + o.export;"],
  ["method named import", "const o = { import() { return 1 } }; return o.import();"],
  [
    "class members named require/import",
    "class C { require = 1; static import() {} } return new C().require;",
  ],
  ["label named require", "require: for (;;) { break require; } return 1;"],
  ["typeof require", "return typeof require === 'undefined';"],
  ["top-level await and return", "const v = await Promise.resolve(4); return v * 2;"],
  ["tools call", "const r = await tools.call('search', { query: 'import' }); return r;"],
  ["sloppy-mode with statement", "with ({ a: 1 }) { return a; }"],
  ["html-like comment is sloppy script", "const x = 1;\nreturn x;"],
  ["object key shorthand of other name", "const importance = 1; return { importance };"],
  ["empty cell", ""],
  // Built at run time, so invisible to any static check: the sandbox has no loader, so these fail there.
  ["import built inside eval", "return eval('imp' + 'ort(\\'x\\')');"],
  ["require reached by a computed name", "return globalThis['req' + 'uire'];"],
];

// Module access in every shape the parser can see, with where it must be reported.
const refused: Array<
  [name: string, cell: string, construct: ModuleAccessConstruct, line: number, column: number]
> = [
  ["static import", "import fs from 'fs';\nreturn 1;", "import-declaration", 1, 1],
  ["side-effect import", "\n  import 'polyfill';", "import-declaration", 2, 3],
  ["named import inside block", "if (true) {\n  import { a } from 'b';\n}", "import-declaration", 2, 3],
  ["namespace import", "import * as path from 'node:path';", "import-declaration", 1, 1],
  ["export const", "export const x = 1;", "export-declaration", 1, 1],
  ["export default", "const x = 1;\nexport default x;", "export-declaration", 2, 1],
  ["export all", "export * from 'x';", "export-declaration", 1, 1],
  ["dynamic import", "const m = await import('node:fs');", "dynamic-import", 1, 17],
  ["dynamic import of expression", "const name = 'fs';\nreturn import(name);", "dynamic-import", 2, 8],
  ["dynamic import nested in a function", "function load() { return import('x') }", "dynamic-import", 1, 26],
  ["import.meta", "return import.meta.url;", "import-meta", 1, 8],
  ["require call", "const fs = require('fs');", "require", 1, 12],
  ["require in a template expression", "return `${require('os').hostname()}`;", "require", 1, 11],
  ["require.resolve", "return require.resolve('x');", "require", 1, 8],
  ["require aliased", "const r = require;\nreturn r('fs');", "require", 1, 11],
  ["require passed as argument", "[1].map(require);", "require", 1, 9],
  ["require shorthand property", "return { require };", "require", 1, 10],
  ["require declared locally", "function require(x) { return x }", "require", 1, 10],
  ["new require", "new require('x');", "require", 1, 5],
  ["computed require from this", "return this[require];", "require", 1, 13],
  ["globalThis.require", "return globalThis.require('fs');", "loader-member", 1, 8],
  ["globalThis['require']", "return globalThis['require']('fs');", "loader-member", 1, 8],
  ["module.require", "module.require('fs');", "loader-member", 1, 1],
  ["process.mainModule.require", "process.mainModule.require('child_process');", "loader-member", 1, 1],
  ["self.require", "self.require('x');", "loader-member", 1, 1],
  [
    "after honest code",
    "const s = 'import';\n// require\nconst t = `${s}`;\nreturn import('x');",
    "dynamic-import",
    4,
    8,
  ],
];

describe("checkModuleAccess", () => {
  it.each(accepted)("accepts %s", (_name, cell) => {
    expect(() => checkModuleAccess(cell)).not.toThrow();
  });

  it.each(refused)("refuses %s", (_name, cell, construct, line, column) => {
    const error = catchError(() => checkModuleAccess(cell));
    expect(error.code).toBe("module_access_denied");
    expect(error.details).toMatchObject({ construct, line, column });
    expect(error.message).toContain(`line ${line}:${column}`);
    expect(error.message).toMatch(/tools\.call/);
  });

  const unparsable: Array<[name: string, cell: string, line: number, column: number]> = [
    ["dangling operator", "const x = 1 +;", 1, 14],
    ["unclosed brace on line 3", "const a = 1;\nif (a) {\n  return a;\n", 4, 1],
    ["await in a plain nested function", "function f() {\n  await g();\n}", 2, 9],
    ["hashbang (not legal in a function body)", "#!/usr/bin/env node\nreturn 1;", 1, 2],
    ["import with a syntax error", "import { from 'x';", 1, 15],
    ["absurd nesting", "[".repeat(50_000), 1, 1],
  ];

  it.each(unparsable)("fails closed with invalid_input on %s", (_name, cell, line, column) => {
    const error = catchError(() => checkModuleAccess(cell));
    expect(error.code).toBe("invalid_input");
    expect(error.details).toMatchObject({ line, column });
    expect(error.message).toContain(`line ${line}:${column}`);
  });
});

function catchError(run: () => unknown): CodeModeError {
  try {
    run();
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("expected a CodeModeError, but nothing was thrown");
}
