import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { APP_DIR } from "./harness.js";

// Issue 18 (cold start): the way to a first result loads only what it needs. These tests protect that
// without timing anything: a fresh process records every module it loads (ES modules through a loader
// hook, CommonJS through the require cache), and the list must not hold the libraries that only some
// paths need. A positive control makes sure the trace would see them if they were loaded.

const TRACE = join(APP_DIR, "test", "fixtures", "trace-modules.mjs");
const COLD_EXEC = join(APP_DIR, "test", "fixtures", "cold-exec.mjs");

/** Runs a script of the fixtures in a fresh node, returns the module files its main thread loaded. */
function loadedModules(script: string, args: string[] = []): string[] {
  const file = join(mkdtempSync(join(tmpdir(), "codecell-trace-")), "modules.json");
  execFileSync(process.execPath, ["--import", TRACE, script, ...args], {
    cwd: APP_DIR,
    env: { ...process.env, TRACE_MODULES_FILE: file },
    stdio: ["ignore", "inherit", "inherit"],
    timeout: 60_000,
  });
  return JSON.parse(readFileSync(file, "utf8")) as string[];
}

/** Which of the libraries the first result must not need appear in a module list. */
function heavyLibraries(files: string[]): string[] {
  const heavy = new Set<string>();
  for (const file of files) {
    const dependency =
      /[\\/]node_modules[\\/](zod|minisearch|better-sqlite3|ioredis|sucrase|@modelcontextprotocol[\\/]sdk)[\\/]/.exec(
        file,
      );
    if (dependency) heavy.add(dependency[1]!.replace("\\", "/"));
    const workspace = /[\\/]packages[\\/](mcp-connector|transpile)[\\/]/.exec(file);
    if (workspace) heavy.add(`@codecell/${workspace[1]}`);
  }
  return [...heavy].sort();
}

describe("cold start: what the first result loads", () => {
  it("importing @codecell/engine and running `return 1 + 1` loads no zod, search library, SQLite, Redis, TypeScript or MCP code", () => {
    const files = loadedModules(COLD_EXEC);
    expect(files.some((file) => /[\\/]packages[\\/]engine[\\/]dist[\\/]index\.js$/.test(file))).toBe(true);
    expect(heavyLibraries(files)).toEqual([]);
  });

  it("a search and a refused input do load the search library and zod (the trace sees lazy loads)", () => {
    const files = loadedModules(COLD_EXEC, ["search-and-refusal"]);
    expect(heavyLibraries(files)).toEqual(["minisearch", "zod"]);
  });
});
