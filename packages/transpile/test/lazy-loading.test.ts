import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { checkModuleAccess, isTypeScriptLoaded, prepareCell } from "../src/index.js";

// Node's CommonJS cache sees sucrase as soon as anything imports it, whoever asked for it.
const require = createRequire(import.meta.url);
const sucraseModulesLoaded = () =>
  Object.keys(require.cache).filter((path) => /[\\/]sucrase[\\/]/.test(path));

// The order matters: this file proves that nothing before the first TypeScript cell loads the compiler.
describe("lazy loading of the TypeScript transformer", () => {
  it("is not loaded by importing the package", () => {
    expect(isTypeScriptLoaded()).toBe(false);
    expect(sucraseModulesLoaded()).toEqual([]);
  });

  it("is not loaded by JavaScript cells, refused cells or the module check", async () => {
    expect((await prepareCell("return 1 + 1;", "javascript")).code).toBe("return 1 + 1;");
    await expect(prepareCell("import x from 'y';", "javascript")).rejects.toMatchObject({
      code: "module_access_denied",
    });
    await expect(prepareCell("const x: number = 1;", "javascript")).rejects.toMatchObject({
      code: "invalid_input",
    });
    checkModuleAccess("const important = 'require';");
    expect(isTypeScriptLoaded()).toBe(false);
    expect(sucraseModulesLoaded()).toEqual([]);
  });

  it("is loaded by the first TypeScript cell", async () => {
    expect((await prepareCell("const n: number = 1;\nreturn n;", "typescript")).code).toBe(
      "const n = 1;\nreturn n;",
    );
    expect(isTypeScriptLoaded()).toBe(true);
    expect(sucraseModulesLoaded().length).toBeGreaterThan(0);
  });
});
