import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import ts from "typescript";

/**
 * Type-checks declaration files (and optional usage files) as `tsc --noEmit --strict` would, from a
 * scratch directory. Returns the diagnostics as `path:line: message` strings, empty when clean.
 */
export function compileDeclarations(files: Array<{ path: string; content: string }>): string[] {
  const root = mkdtempSync(join(tmpdir(), "codecell-mcp-decl-"));
  try {
    const names: string[] = [];
    for (const file of files) {
      const full = join(root, file.path);
      mkdirSync(dirname(full), { recursive: true });
      writeFileSync(full, file.content);
      names.push(full);
    }
    const program = ts.createProgram(names, {
      noEmit: true,
      strict: true,
      target: ts.ScriptTarget.ES2022,
      lib: ["lib.es2022.d.ts"],
      types: [],
      skipLibCheck: false,
    });
    return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
      if (!diagnostic.file || diagnostic.start === undefined) return message;
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      return `${diagnostic.file.fileName.slice(root.length + 1)}:${line + 1}: ${message}`;
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
