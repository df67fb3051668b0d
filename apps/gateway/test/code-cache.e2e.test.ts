import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeSetup, runCli } from "./harness.js";

// Cold start: the CLI's bundle is compiled with V8's code cache kept on disk (src/cli/cli-entry.ts), and
// so is the in-thread sandbox's bundle, whose shipped cache V8 refuses under the CLI's flags. The caches
// are an optimisation only: these tests check that they are written, then used, and that a corrupt,
// foreign or unwritable cache changes nothing a user sees. CODECELL_DEBUG_CODE_CACHE=1 makes
// the start-up file say what it did with the cache; nothing here times anything.

const CELL = "return [1, 2, 3].map((n) => n * 2)";

/** `codecell exec` of one cell with the code cache in `cacheDir`; the result must be the same every time. */
async function execWithCache(cacheDir: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  // Code mode is active only with at least one tool: one plugin tool, no MCP server.
  const setup = makeSetup({
    tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
    plugins: [{ module: "./plugin.mjs" }],
  });
  writeFileSync(
    join(setup.dir, "plugin.mjs"),
    `export function createPlugin() {
      return { id: "probe", tools: [{ name: "inc", description: "Adds one.",
        parameters: { type: "object", properties: { value: { type: "number" } } },
        execute: (input) => input.value + 1 }] };
    }`,
  );
  const { code, stdout, stderr } = await runCli(["exec", "--config", setup.configPath, "-"], {
    input: CELL,
    env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1", ...env },
  });
  expect(code, stderr).toBe(0);
  expect(JSON.parse(stdout)).toMatchObject({ status: "completed", value: [2, 4, 6] });
  return stderr;
}

function cacheFiles(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((name) => name.endsWith(".v8cache")) : [];
}

describe("the CLI's code cache", () => {
  it("is written by the first start, used by the next, and rewritten when V8 rejects it", async () => {
    const cacheDir = join(mkdtempSync(join(tmpdir(), "codecell-code-cache-")), "nested", "cache");
    const first = await execWithCache(cacheDir);
    expect(first).toMatch(/\[codecell:code-cache\] no cache yet at /);
    expect(first).toMatch(
      /\[codecell:code-cache\] wrote .*cli-[0-9a-f]{16}-node[\d.]+-\w+-one-shot\.v8cache \(\d+ bytes\)/,
    );
    // The in-thread sandbox's, beside it: the one the sandbox ships was made without the CLI's V8 flags.
    expect(first).toMatch(
      /\[codecell:code-cache\] wrote .*sandbox-in-thread\.bundle\.[0-9a-f]{16}-node[\d.]+-\w+-one-shot\.v8cache \(\d+ bytes\)/,
    );
    const [file, guestFile] = cacheFiles(cacheDir);
    expect(file).toMatch(/^cli-/);
    expect(guestFile).toMatch(/^sandbox-/);
    // No partial file is left beside them.
    expect(readdirSync(cacheDir).sort()).toEqual([file, guestFile]);

    const second = await execWithCache(cacheDir);
    expect(second).toContain(`[codecell:code-cache] used ${join(cacheDir, file!)}`);
    expect(second).toContain(`[codecell:code-cache] read ${join(cacheDir, guestFile!)}`);
    // V8 took both: neither is written again.
    expect(second).not.toContain("wrote");

    // Garbage where the cache was: V8 refuses it, the bundle compiles from source, the cache is rewritten.
    const garbage = Buffer.alloc(4096, 7);
    writeFileSync(join(cacheDir, file!), garbage);
    const third = await execWithCache(cacheDir);
    expect(third).toContain(`[codecell:code-cache] V8 rejected ${join(cacheDir, file!)}; it is rewritten`);
    expect(third).toMatch(/\[codecell:code-cache\] wrote /);
    expect(readFileSync(join(cacheDir, file!)).equals(garbage)).toBe(false);
    expect((await execWithCache(cacheDir)).includes("used")).toBe(true);

    // The same for the sandbox's: garbage is refused, the sandbox's bundle compiles from source, and
    // the cache is rewritten after the cell.
    writeFileSync(join(cacheDir, guestFile!), garbage);
    const fifth = await execWithCache(cacheDir);
    expect(fifth).toContain(`[codecell:code-cache] wrote ${join(cacheDir, guestFile!)}`);
    expect(readFileSync(join(cacheDir, guestFile!)).equals(garbage)).toBe(false);
    expect(await execWithCache(cacheDir)).not.toContain("wrote");
  });

  it("keeps the caches of `serve` and of the one-shot commands apart (their V8 flags differ)", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    await execWithCache(cacheDir);
    const setup = makeSetup({ tools: { codeMode: { enabled: true } } });
    const served = await runCli(["serve", "--config", setup.configPath], {
      env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect(served.code, served.stderr).toBe(0);
    expect(served.stderr).toMatch(/\[codecell:code-cache\] wrote .*-serve\.v8cache/);
    // Back to exec: its caches are still there, and V8 takes them.
    const again = await execWithCache(cacheDir);
    expect(again).toMatch(/\[codecell:code-cache\] used .*-one-shot\.v8cache/);
    expect(again).not.toContain("wrote");
    expect(cacheFiles(cacheDir).map((name) => name.replace(/[0-9a-f]{16}/, "<hash>"))).toEqual([
      expect.stringMatching(/^cli-<hash>-node[\d.]+-\w+-one-shot\.v8cache$/),
      expect.stringMatching(/^cli-<hash>-node[\d.]+-\w+-serve\.v8cache$/),
      expect.stringMatching(/^sandbox-in-thread\.bundle\.<hash>-node[\d.]+-\w+-one-shot\.v8cache$/),
    ]);
  });

  it("is written by `serve` when it stops, even before it has served for long", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    const setup = makeSetup({ tools: { codeMode: { enabled: true } } });
    // stdin is closed at once: the client is gone, serve stops.
    const { code, stderr } = await runCli(["serve", "--config", setup.configPath], {
      env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect(code, stderr).toBe(0);
    expect(stderr).toMatch(/\[codecell:code-cache\] wrote /);
    expect(cacheFiles(cacheDir)).toHaveLength(1);
  });

  it("replaces the caches of another build instead of keeping both", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    const stale = [
      "cli-0123456789abcdef-node0.0.0-x64.v8cache",
      "cli-0123456789abcdef-node0.0.0-x64-serve.v8cache",
      `sandbox-in-thread.bundle.0123456789abcdef-node${process.versions.node}-${process.arch}-one-shot.v8cache`,
    ];
    for (const name of stale) writeFileSync(join(cacheDir, name), "an older build's cache");
    writeFileSync(join(cacheDir, "unrelated.txt"), "not ours");
    await execWithCache(cacheDir);
    const files = readdirSync(cacheDir).sort();
    expect(files).toHaveLength(3);
    expect(files).toContain("unrelated.txt");
    for (const name of stale) expect(files).not.toContain(name);
  });

  it("changes nothing when the cache folder cannot be created, is not written by check, and is off with CODECELL_CODE_CACHE=0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    const blocker = join(dir, "a-file");
    writeFileSync(blocker, "");
    const unwritable = await execWithCache(join(blocker, "cache"));
    expect(unwritable).toMatch(/\[codecell:code-cache\] could not write .*a-file/);

    // Only the commands that run cells write it (once their start-up path has run): not `check`.
    const checked = join(dir, "checked");
    const setup = makeSetup({ tools: { codeMode: { enabled: true } } });
    const check = await runCli(["check", "--config", setup.configPath], {
      env: { CODECELL_CACHE_DIR: checked, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect(check.code, check.stderr).toBe(0);
    expect(check.stderr).toContain("[codecell:code-cache] no cache yet");
    expect(existsSync(checked)).toBe(false);

    const off = join(dir, "off");
    const stderr = await execWithCache(off, { CODECELL_CODE_CACHE: "0" });
    expect(stderr).not.toContain("[codecell:code-cache]");
    expect(existsSync(off)).toBe(false);
  });
});
