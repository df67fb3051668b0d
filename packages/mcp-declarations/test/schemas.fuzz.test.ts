import fc from "fast-check";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { renderMcpDeclarations } from "../src/render-declarations.js";
import type { McpServerDescription } from "../src/types.js";

/**
 * Property-based: any JSON Schema-like value an MCP server might send (valid, odd or malformed,
 * `$ref` to the root, to missing or remote targets) renders to declarations that type-check under
 * `tsc --strict`. Each case runs the compiler, so CI runs a bounded number (FUZZ_RUNS unset: 5) and
 * `pnpm fuzz` many more.
 */

const runs = Number(process.env.FUZZ_RUNS ?? 5);

/**
 * `tsc --noEmit --strict` over the generated files, in memory. The standard library is parsed once
 * and not checked again for every case (`skipDefaultLibCheck`); the generated `.d.ts` files are
 * checked in full. Each case costs tens of milliseconds instead of seconds.
 */
const ROOT = "/fuzz";
const options: ts.CompilerOptions = {
  noEmit: true,
  strict: true,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  types: [],
  skipLibCheck: false,
  skipDefaultLibCheck: true,
};
const libraryHost = ts.createCompilerHost(options);
const libraryFiles = new Map<string, ts.SourceFile | undefined>();
function typeCheck(files: Array<{ path: string; content: string }>): string[] {
  const generated = new Map(files.map((file) => [`${ROOT}/${file.path}`, file.content]));
  const host: ts.CompilerHost = {
    ...libraryHost,
    fileExists: (fileName) => generated.has(fileName) || libraryHost.fileExists(fileName),
    readFile: (fileName) => generated.get(fileName) ?? libraryHost.readFile(fileName),
    getSourceFile(fileName, languageVersion) {
      const content = generated.get(fileName);
      if (content !== undefined) return ts.createSourceFile(fileName, content, languageVersion, true);
      if (!libraryFiles.has(fileName))
        libraryFiles.set(fileName, libraryHost.getSourceFile(fileName, languageVersion));
      return libraryFiles.get(fileName);
    },
    writeFile: () => {},
  };
  const program = ts.createProgram([...generated.keys()], options, host);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
    if (!diagnostic.file || diagnostic.start === undefined) return message;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return `${diagnostic.file.fileName}:${line + 1}: ${message}`;
  });
}
const name = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("class", "__proto__", "*/", "a-b", "1x", "constructor"),
);
const schema = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record(
      {
        type: fc.constantFrom(
          "string",
          "number",
          "integer",
          "boolean",
          "null",
          "object",
          "array",
          "banana",
          7,
        ),
        description: fc.string({ maxLength: 20 }),
        enum: fc.array(fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.boolean(), fc.constant(null)), {
          maxLength: 3,
        }),
        properties: fc.dictionary(name, tie("node"), { maxKeys: 3 }),
        required: fc.array(name, { maxLength: 2 }),
        items: tie("node"),
        anyOf: fc.array(tie("node"), { maxLength: 2 }),
        $ref: fc.constantFrom("#/$defs/A", "#/definitions/missing", "http://x", "#"),
        additionalProperties: fc.oneof(fc.boolean(), tie("node")),
      },
      { requiredKeys: [] },
    ),
    fc.anything({ maxDepth: 2 }),
  ),
})).node;

const server = fc.record({
  name: name,
  tools: fc.array(
    fc.record(
      { name, description: fc.string({ maxLength: 20 }), inputSchema: schema, outputSchema: schema },
      { requiredKeys: ["name"] },
    ),
    { maxLength: 3 },
  ),
});

describe("declaration generator fuzz", () => {
  it("uses a checker that reports errors in generated files", () => {
    expect(typeCheck([{ path: "mcp/bad.d.ts", content: "declare const broken: Missing;" }])).toEqual([
      expect.stringContaining("Cannot find name 'Missing'"),
    ]);
  });

  it("renders declarations that always type-check", () => {
    fc.assert(
      fc.property(fc.array(server, { minLength: 1, maxLength: 2 }), (servers) => {
        const declarations = renderMcpDeclarations(servers as unknown as McpServerDescription[]);
        expect(typeCheck(declarations.files)).toEqual([]);
      }),
      // Each case runs the compiler: report the first counterexample rather than shrink for minutes.
      { numRuns: runs, endOnFailure: true },
    );
  }, 600_000);
});
