import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// The package as published: its "." export is the bundle the build writes to dist/bundle/
// (scripts/bundle-engine.mjs), which inlines the `@codecell/*` packages below the engine. A host that
// imports some of those packages by name beside it gets second copies of them; these tests run such a
// host in a plain `node` (test/fixtures/bundle-host.mjs) and check what it depends on still holds.

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const HOST = fileURLToPath(new URL("fixtures/bundle-host.mjs", import.meta.url));

type Outcome = { status: string; value?: unknown; code?: string; error?: string };

describe("the published bundle", () => {
  it("is the package's export: an entry that starts the sandbox's worker, then the engine as one ES module that loads the transpiler and type checker on demand", async () => {
    const manifest = JSON.parse(readFileSync(`${PACKAGE_DIR}/package.json`, "utf8")) as {
      exports: Record<string, Record<string, string>>;
    };
    expect(manifest.exports["."]!.default).toBe("./dist/bundle/index.js");
    expect(manifest.exports["."]!["@codecell/source"]).toBe("./src/index.ts");
    // What each file imports, as esbuild reads it: by name, and how (a static import or an import()).
    const importsOf = async (file: string) => {
      const result = await build({
        entryPoints: [`${PACKAGE_DIR}/dist/bundle/${file}`],
        bundle: false,
        write: false,
        metafile: true,
        format: "esm",
        platform: "node",
        outdir: "out",
        logLevel: "silent",
      });
      return new Set(
        Object.values(result.metafile.outputs)[0]!
          .imports.filter((imported) => !imported.path.startsWith("node:"))
          .map((imported) => `${imported.kind} ${imported.path}`),
      );
    };
    // The entry starts the sandbox's worker, then loads the engine: one ES module, which leaves only
    // the worker start (shared with the entry) and the lazy packages outside.
    expect(await importsOf("index.js")).toEqual(
      new Set(["import-statement @codecell/sandbox/worker-start", "dynamic-import ./engine.js"]),
    );
    expect(await importsOf("engine.js")).toEqual(
      new Set([
        "import-statement @codecell/sandbox/worker-start",
        "dynamic-import @codecell/transpile",
        "dynamic-import @codecell/typecheck",
      ]),
    );
    // No start-up machinery beside them: Node loads these modules as it loads any other.
    expect(readdirSync(`${PACKAGE_DIR}/dist/bundle`).sort()).toEqual([
      "engine.js",
      "engine.js.map",
      "index.js",
    ]);
    expect(existsSync(`${PACKAGE_DIR}/dist/index.d.ts`)).toBe(true);
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
