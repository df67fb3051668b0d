import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The TypeScript compiler is compiled with V8's code cache kept on disk (src/worker/compiler-loader.js).
// V8 takes a cache only under the V8 flags it was made with, and processes that check cells run under
// different ones: a library host under none, the gateway's `serve` and its one-shot commands each under
// their own. Each fresh process here loads the compiler as a check does and says what it did with the
// cache; nothing is timed.

const LOADER = fileURLToPath(new URL("../src/worker/compiler-loader.js", import.meta.url));
const { version } = createRequire(import.meta.url)("typescript/package.json") as { version: string };

/** Loads the compiler in a fresh node, after setting `flags` as the gateway's CLI does, and saves. */
function load(cacheDir: string, flags: string[] = []): string {
  const program = `
    import { setFlagsFromString } from "node:v8";
    import { createRequire } from "node:module";
    for (const flag of ${JSON.stringify(flags)}) setFlagsFromString(flag);
    const { loadCompiler } = await import(${JSON.stringify(LOADER)});
    const compiler = loadCompiler(createRequire(${JSON.stringify(LOADER)}));
    if (typeof compiler.ts.createSourceFile !== "function") throw new Error("no compiler");
    compiler.save();
    process.stdout.write(compiler.cache);`;
  return execFileSync(process.execPath, ["--input-type=module", "-e", program], {
    env: { ...process.env, CODECELL_CACHE_DIR: cacheDir, CODECELL_CODE_CACHE: "1" },
    encoding: "utf8",
    timeout: 60_000,
  });
}

const ONE_SHOT = ["--wasm-num-compilation-tasks=1", "--wasm-tiering-budget=180000000"];
const SERVE = ["--wasm-num-compilation-tasks=1"];

describe("the TypeScript compiler's code cache", () => {
  it("is kept per set of V8 flags, so processes under other flags do not refuse and rewrite each other's", () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-ts-cache-"));
    expect(load(cacheDir)).toBe("none");
    expect(load(cacheDir, ONE_SHOT)).toBe("none");
    expect(load(cacheDir, SERVE)).toBe("none");
    // Alternating, each finds its own and V8 takes it.
    expect(load(cacheDir, ONE_SHOT)).toBe("used");
    expect(load(cacheDir)).toBe("used");
    expect(load(cacheDir, SERVE)).toBe("used");
    const files = readdirSync(cacheDir).sort();
    expect(files).toHaveLength(3);
    for (const file of files) {
      expect(file).toMatch(
        new RegExp(
          `^typescript-${version.replaceAll(".", "\\.")}-node${process.versions.node}-${process.arch}-v8-[0-9a-f]+\\.v8cache$`,
        ),
      );
    }
  });

  it("is rewritten when V8 refuses it, and replaces other versions' caches and the old names", () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-ts-cache-"));
    expect(load(cacheDir)).toBe("none");
    const [own] = readdirSync(cacheDir);
    writeFileSync(join(cacheDir, own!), Buffer.alloc(4096, 7));
    expect(load(cacheDir)).toBe("rejected");
    expect(load(cacheDir)).toBe("used");

    const node = process.versions.node;
    const arch = process.arch;
    const stale = [
      `typescript-${version}-node${node}-${arch}.v8cache`,
      `typescript-0.0.1-node${node}-${arch}-v8-1234abcd.v8cache`,
      `typescript-${version}-node0.0.0-${arch}-v8-1234abcd.v8cache`,
    ];
    const kept = [
      // Another set of flags, and another architecture sharing the folder: not stale.
      `typescript-${version}-node${node}-${arch}-v8-1234abcd.v8cache`,
      `typescript-${version}-node${node}-${arch === "x64" ? "arm64" : "x64"}.v8cache`,
      "unrelated.txt",
    ];
    for (const name of [...stale, ...kept])
      writeFileSync(join(cacheDir, name), "not a cache of this process");
    // Only a process that writes its cache clears the stale ones: this one finds none of its own.
    rmSync(join(cacheDir, own!));
    expect(load(cacheDir)).toBe("none");
    for (const name of stale) expect(existsSync(join(cacheDir, name)), name).toBe(false);
    for (const name of [own!, ...kept]) expect(existsSync(join(cacheDir, name)), name).toBe(true);
  });

  it("is neither read nor written with CODECELL_CODE_CACHE=0", () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-ts-cache-"));
    const program = `
      import { createRequire } from "node:module";
      const { loadCompiler } = await import(${JSON.stringify(LOADER)});
      const compiler = loadCompiler(createRequire(${JSON.stringify(LOADER)}));
      compiler.save();
      process.stdout.write(compiler.cache);`;
    const cache = execFileSync(process.execPath, ["--input-type=module", "-e", program], {
      env: { ...process.env, CODECELL_CACHE_DIR: cacheDir, CODECELL_CODE_CACHE: "0" },
      encoding: "utf8",
    });
    expect(cache).toBe("off");
    expect(readdirSync(cacheDir)).toEqual([]);
  });
});
