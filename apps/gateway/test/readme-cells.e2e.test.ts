import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { CodeModeResult } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_FILE, loadGatewayConfig } from "../src/config/load-config.js";
import { Gateway } from "../src/gateway.js";
import { NO_APPROVAL_CLIENT } from "../src/mcp/approvals.js";
import { APP_DIR } from "./harness.js";

/**
 * The documentation's cells are tests. Every ```js / ```ts block in the root README, in each package's
 * README and in every `docs/*.md` page is a cell, run against the embedded default config (the one
 * `npm start` serves), and must complete. A
 * block that is not a cell says so in its info string, after the language (documented in the root
 * README, "Development"):
 *   ```ts host     host-side code run in Node (a package's API), not inside a cell
 *   ```ts sketch   signatures or declarations, not meant to run at all
 */
const ROOT = join(APP_DIR, "..", "..");
const NOT_A_CELL = new Set(["host", "sketch"]);
const CELL_LANGUAGES: Record<string, "javascript" | "typescript"> = {
  js: "javascript",
  javascript: "javascript",
  ts: "typescript",
  typescript: "typescript",
};

type Block = { file: string; line: number; language: "javascript" | "typescript"; code: string };

function readmeBlocks(text: string, file: string): { cells: Block[]; marked: number } {
  const lines = text.split("\n");
  const cells: Block[] = [];
  let marked = 0;
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)(`{3,})(\S*)\s*(.*)$/.exec(lines[index]!);
    if (!open) continue;
    const [, indent, fence, language = "", rest = ""] = open;
    const body: string[] = [];
    let end = index + 1;
    while (end < lines.length && !lines[end]!.trimStart().startsWith(fence!)) body.push(lines[end++]!);
    const cellLanguage = CELL_LANGUAGES[language.toLowerCase()];
    if (cellLanguage) {
      const words = rest.split(/\s+/).filter(Boolean);
      if (words.some((word) => NOT_A_CELL.has(word))) marked++;
      else {
        const code = body.map((line) => line.slice(indent!.length)).join("\n");
        cells.push({ file: relative(ROOT, file), line: index + 1, language: cellLanguage, code });
      }
    }
    index = end;
  }
  return { cells, marked };
}

function readmes(): string[] {
  const files = [join(ROOT, "README.md")];
  for (const group of ["packages", "apps"]) {
    for (const name of readdirSync(join(ROOT, group)).sort()) {
      const file = join(ROOT, group, name, "README.md");
      if (existsSync(file)) files.push(file);
    }
  }
  const docs = join(ROOT, "docs");
  if (existsSync(docs)) {
    for (const name of readdirSync(docs).sort()) if (name.endsWith(".md")) files.push(join(docs, name));
  }
  return files;
}

const blocks = readmes().map((file) => ({ file, ...readmeBlocks(readFileSync(file, "utf8"), file) }));
const cells = blocks.flatMap((entry) => entry.cells);

describe("README code blocks", () => {
  it("finds the cells, including the root README's example", () => {
    expect(cells.some((cell) => cell.file === "README.md")).toBe(true);
    expect(cells.length).toBeGreaterThanOrEqual(2);
  });

  it("reads the docs/ pages too", () => {
    expect(blocks.some((entry) => relative(ROOT, entry.file).startsWith(join("docs", "")))).toBe(true);
    expect(cells.some((cell) => cell.file.startsWith(join("docs", "")))).toBe(true);
  });

  it("tells a cell from a marked block by the info string", () => {
    const sample =
      "x\n```js\nreturn 1;\n```\n```ts host\nimport x from 'y';\n```\n  ```ts sketch\n  f(): T\n  ```\n";
    const parsed = readmeBlocks(sample, join(ROOT, "README.md"));
    expect(parsed.marked).toBe(2);
    expect(parsed.cells).toEqual([{ file: "README.md", line: 2, language: "javascript", code: "return 1;" }]);
  });
});

describe("README cells run against the embedded default config, and pass its strict type check", () => {
  let gateway: Gateway;
  beforeAll(async () => {
    const loaded = loadGatewayConfig(DEFAULT_CONFIG_FILE);
    if (!loaded.config) throw new Error(JSON.stringify(loaded.problems));
    // The cells' deadline is the default's own; the machine running the suite may be busy, so a cold
    // first cell is given the contract's largest deadline instead of failing on load. Type check
    // "strict" only refuses a cell (it never changes one that passes), so a documented cell that
    // completes here completes with it off too, and one whose reads the declarations do not allow fails.
    gateway = await Gateway.start({
      ...loaded.config,
      codeMode: {
        ...loaded.config.codeMode,
        timeoutMs: 60_000,
        typecheck: "strict",
        typecheckTimeoutMs: 60_000,
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it.each(cells.map((cell) => [`${cell.file}:${cell.line}`, cell] as const))(
    "%s completes",
    async (_where, cell) => {
      const session = gateway.openSession(`readme-${cell.file}-${cell.line}`, NO_APPROVAL_CLIENT);
      try {
        let result: CodeModeResult = await session.exec({ code: cell.code, language: cell.language });
        for (let waits = 0; result.status === "waiting" && waits < 20; waits++) {
          result = await session.wait({ runId: result.runId });
        }
        expect(result, JSON.stringify(result)).toMatchObject({ status: "completed" });
      } finally {
        await session.end();
      }
    },
  );
});
