import { createRequire } from "node:module";
import type * as TypeScript from "typescript";
import { describe, expect, it } from "vitest";
import { joinedLibrary, withoutComments } from "../src/worker/checker-core.js";

const ts = createRequire(import.meta.url)("typescript") as typeof TypeScript;
const options: TypeScript.CompilerOptions = {
  target: ts.ScriptTarget.ESNext,
  lib: ["lib.esnext.d.ts"],
  types: [],
  noEmit: true,
  skipLibCheck: true,
  noResolve: true,
};
const probe = "/probe.ts";

/** Every global of a program, with its type and (for interfaces and classes) its members' types. */
function globalsOf(files?: Map<string, string>): { files: number; globals: Map<string, string> } {
  const base = ts.createCompilerHost(options);
  const host: TypeScript.CompilerHost = {
    ...base,
    getSourceFile: (name, version) =>
      name === probe
        ? ts.createSourceFile(name, "export {};", version)
        : files?.has(name)
          ? ts.createSourceFile(name, files.get(name)!, version)
          : base.getSourceFile(name, version),
    fileExists: (name) => name === probe || base.fileExists(name),
  };
  const program = ts.createProgram({ rootNames: [probe], options, host });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(probe)!;
  const globals = new Map<string, string>();
  const flags = ts.SymbolFlags.Value | ts.SymbolFlags.Type | ts.SymbolFlags.Namespace;
  for (const symbol of checker.getSymbolsInScope(source, flags)) {
    const type =
      symbol.flags & ts.SymbolFlags.Value
        ? checker.getTypeOfSymbol(symbol)
        : checker.getDeclaredTypeOfSymbol(symbol);
    const declared = checker.getDeclaredTypeOfSymbol(symbol);
    const members = checker
      .getPropertiesOfType(declared)
      // A well-known symbol's member is named with the symbol's id (`__@iterator@30`), which differs.
      .map(
        (member) =>
          `${member.getName().replace(/@\d+$/, "")}: ${checker.typeToString(checker.getTypeOfSymbol(member))}`,
      );
    globals.set(symbol.getName(), `${checker.typeToString(type)} | ${members.join("; ")}`);
  }
  return { files: program.getSourceFiles().length, globals };
}

describe("the library the checker reads", () => {
  it("declares exactly what the 80 files of lib.esnext.d.ts do, in four", () => {
    const directory = ts.createCompilerHost(options).getDefaultLibLocation!();
    const standard = globalsOf();
    const joined = globalsOf(joinedLibrary(ts, directory));
    expect(standard.files).toBe(81);
    expect(joined.files).toBe(5);
    expect(joined.globals.size).toBeGreaterThan(150);
    expect([...joined.globals.keys()].sort()).toEqual([...standard.globals.keys()].sort());
    for (const [name, description] of standard.globals)
      expect(joined.globals.get(name), name).toBe(description);
  });

  it("drops comments and keeps strings", () => {
    expect(withoutComments("a /* b */ c // d\n\"// e\" `/* f */` 'g\\' // h' i")).toBe(
      "a  c \n\"// e\" `/* f */` 'g\\' // h' i",
    );
  });
});
