import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  KEYWORDS_READ,
  SUCRASE_INTERNAL_FILES,
  SUCRASE_VERSION,
  TOKEN_TYPES_READ,
} from "../src/sucrase-internals.js";

// The TypeScript transformer reaches into sucrase's dist/ files (src/sucrase-internals.ts). A sucrase
// update that moves one must fail here, naming the file, rather than fail every TypeScript cell later.

const require = createRequire(import.meta.url);
const sucraseDir = dirname(require.resolve("sucrase/package.json"));
const installed = (JSON.parse(readFileSync(join(sucraseDir, "package.json"), "utf8")) as { version: string })
  .version;
const pinned = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    dependencies: Record<string, string>;
  }
).dependencies.sucrase;
const UPDATE = "update src/sucrase-internals.ts";
const take = ({ file, member }: { file: string; member: string }) => require(`sucrase/${file}`)[member];

describe("sucrase's internals", () => {
  it("are used with the version they were written for, pinned exactly", () => {
    expect(pinned, `pin sucrase exactly to ${SUCRASE_VERSION} in package.json, or ${UPDATE}`).toBe(
      SUCRASE_VERSION,
    );
    expect(installed, `sucrase ${installed} is installed; ${UPDATE} for it`).toBe(SUCRASE_VERSION);
  });

  it.each(Object.entries(SUCRASE_INTERNAL_FILES))(
    "has %s where the transformer takes it",
    (name, { file, member }) => {
      expect(existsSync(join(sucraseDir, file)), `sucrase ${installed} moved ${file}; ${UPDATE}`).toBe(true);
      const value = take({ file, member });
      const kind = name === "tokenType" || name === "keyword" ? "object" : "function";
      expect(typeof value, `sucrase ${installed} has no ${member} in ${file}; ${UPDATE}`).toBe(kind);
    },
  );

  it("name the token types and keywords the scan reads", () => {
    const tokenType = take(SUCRASE_INTERNAL_FILES.tokenType);
    const keyword = take(SUCRASE_INTERNAL_FILES.keyword);
    for (const name of TOKEN_TYPES_READ) {
      expect(typeof tokenType[name], `sucrase ${installed} has no TokenType.${name}; ${UPDATE}`).toBe(
        "number",
      );
    }
    for (const name of KEYWORDS_READ) {
      expect(typeof keyword[name], `sucrase ${installed} has no ContextualKeyword.${name}; ${UPDATE}`).toBe(
        "number",
      );
    }
  });
});
