import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// The package as published: its "." export is the bundle the build writes to dist/bundle/
// (scripts/bundle-engine.mjs), which inlines the `@codecell/*` packages below the engine. A host that
// imports some of those packages by name beside it gets second copies of them; these tests run such a
// host in a plain `node` (test/fixtures/bundle-host.mjs) and check what it depends on still holds.

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const HOST = fileURLToPath(new URL("fixtures/bundle-host.mjs", import.meta.url));
const CODE_CACHE_HOST = fileURLToPath(new URL("fixtures/code-cache-host.mjs", import.meta.url));

type Outcome = { status: string; value?: unknown; code?: string; error?: string };

describe("the published bundle", () => {
  it("is the package's export: an entry that leaves only the sandbox's worker start outside, and the engine as one script with its code cache, which loads the transpiler and type checker on demand", async () => {
    const manifest = JSON.parse(readFileSync(`${PACKAGE_DIR}/package.json`, "utf8")) as {
      exports: Record<string, Record<string, string>>;
    };
    expect(manifest.exports["."]!.default).toBe("./dist/bundle/index.js");
    expect(manifest.exports["."]!["@codecell/source"]).toBe("./src/index.ts");
    // What the entry imports, as esbuild reads it: by name, and how (a static import or an import()).
    const result = await build({
      entryPoints: [`${PACKAGE_DIR}/dist/bundle/index.js`],
      bundle: false,
      write: false,
      metafile: true,
      format: "esm",
      platform: "node",
      outdir: "out",
      logLevel: "silent",
    });
    const entryImports = Object.values(result.metafile.outputs)[0]!
      .imports.filter((imported) => !imported.path.startsWith("node:"))
      .map((imported) => `${imported.kind} ${imported.path}`);
    // The import() left in the entry is the one it hands the engine's script (with a specifier of the script's).
    expect(new Set(entryImports)).toEqual(new Set(["import-statement @codecell/sandbox/worker-start"]));
    // The engine's script requires only node's modules and the worker start (which the entry answers),
    // and has no import() of its own: each went through the entry's, by name.
    const script = readFileSync(`${PACKAGE_DIR}/dist/bundle/engine-api.cjs`, "latin1");
    const required = new Set([...script.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]));
    expect([...required].filter((name) => !name?.startsWith("node:"))).toEqual([
      "@codecell/sandbox/worker-start",
    ]);
    expect(script).not.toMatch(/\bimport\s*\(/);
    const lazy = new Set([...script.matchAll(/__codecellImport\("([^"]+)"\)/g)].map((match) => match[1]));
    expect(lazy).toEqual(new Set(["@codecell/transpile", "@codecell/typecheck"]));
    // The code cache the build wrote, named after the script's text (see the entry).
    const entry = readFileSync(`${PACKAGE_DIR}/dist/bundle/index.js`, "utf8");
    const api = JSON.parse(/^const API = (.*);$/m.exec(entry)![1]!) as { length: number; cache: string };
    expect(api.length).toBe(script.length);
    expect(existsSync(`${PACKAGE_DIR}/dist/bundle/${api.cache}`)).toBe(true);
    expect(existsSync(`${PACKAGE_DIR}/dist/index.d.ts`)).toBe(true);
  });

  it("uses its code cache in a plain node, and runs the same without it", () => {
    const accepted = (codeCache: string) =>
      execFileSync(process.execPath, [CODE_CACHE_HOST], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, NODE_OPTIONS: "", CODECELL_CODE_CACHE: codeCache },
        encoding: "utf8",
        timeout: 60_000,
      });
    // cachedDataRejected is set only when cached data was given: false means V8 took the cache.
    expect(JSON.parse(accepted("1"))).toEqual({ rejected: false, value: 42 });
    expect(JSON.parse(accepted("0"))).toEqual({ rejected: null, value: 42 });
  });

  it("serves a host that uses its own copies of contract and namespaces, and loads what it needs on demand", () => {
    const output = execFileSync(process.execPath, [HOST], {
      cwd: PACKAGE_DIR,
      // A plain node: the package's built files, whatever conditions the test runner uses.
      env: { ...process.env, NODE_OPTIONS: "" },
      encoding: "utf8",
      timeout: 120_000,
    });
    const seen = JSON.parse(output) as Record<string, unknown> & Record<string, Outcome>;
    expect(seen.engineUrl).toMatch(/[\\/]engine[\\/]dist[\\/]bundle[\\/]index\.js$/);
    // The engine's CodeModeError, caught with the host's class.
    expect(seen.badConfig).toEqual({ instanceOfHostClass: true, isByBrand: true, code: "invalid_config" });
    // A namespace registered (and its tool markers made) through the host's copy of the package.
    expect(seen.namespace).toMatchObject({ status: "completed", value: ["object", ["call mom"]] });
    // The search index (MiniSearch, from @codecell/catalog's dependencies), zod (an input it must
    // explain), the TypeScript transformer (@codecell/transpile), the snapshot store (a suspended run).
    expect(seen.search).toMatchObject({ status: "completed", value: ["notes_add", "notes_list"] });
    expect(seen.refused).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(seen.refused?.error).toContain('"bogus"');
    expect(seen.typescript).toMatchObject({ status: "completed", value: 42 });
    expect(seen.waiting).toBe("waiting");
    expect(seen.resumed).toMatchObject({ status: "completed", value: "resumed" });
    expect(seen.trajectoryEntries).toBeGreaterThan(0);
  });
});
