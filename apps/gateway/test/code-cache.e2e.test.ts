import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { callCodeMode, connectHttp, connectStdio, makeSetup, runCli, startHttpGateway } from "./harness.js";

// Cold start: the CLI's bundle is compiled with V8's code cache kept on disk (src/cli/cli-entry.ts), and
// so is the in-thread sandbox's bundle, whose shipped cache V8 refuses under the CLI's flags. The caches
// are an optimisation only: these tests check that they are written, then used, and that a corrupt,
// foreign or unwritable cache changes nothing a user sees. CODECELL_DEBUG_CODE_CACHE=1 makes
// the start-up file say what it did with the cache; nothing here times anything.

const CELL = "return [1, 2, 3].map((n) => n * 2)";

/** A config with one plugin tool and no MCP server: code mode is active only with at least one tool. */
function pluginSetup(): ReturnType<typeof makeSetup> {
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
  return setup;
}

/** `codecell exec` of one cell with the code cache in `cacheDir`; the result must be the same every time. */
async function execWithCache(cacheDir: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const { code, stdout, stderr } = await runCli(["exec", "--config", pluginSetup().configPath, "-"], {
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
      /\[codecell:code-cache\] wrote .*cli-[0-9a-f]{16}-node[\d.]+-\w+-v8-[0-9a-f]+\.v8cache \(\d+ bytes\)/,
    );
    // The in-thread sandbox's, beside it: the one the sandbox ships was made without the CLI's V8 flags.
    expect(first).toMatch(
      /\[codecell:code-cache\] wrote .*sandbox-in-thread\.bundle\.[0-9a-f]{16}-node[\d.]+-\w+-v8-[0-9a-f]+\.v8cache \(\d+ bytes\)/,
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

  it("keeps a cache per set of V8 flags: serve's, the one-shot commands', and NODE_OPTIONS' own", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    await execWithCache(cacheDir);
    const setup = makeSetup({ tools: { codeMode: { enabled: true } } });
    const served = await runCli(["serve", "--config", setup.configPath], {
      env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect(served.code, served.stderr).toBe(0);
    const servedFile = /\[codecell:code-cache\] wrote .*[\\/](cli-\S+\.v8cache)/.exec(served.stderr)?.[1];
    // Back to exec: its caches are still there, and V8 takes them.
    const again = await execWithCache(cacheDir);
    const execFile = /\[codecell:code-cache\] used .*[\\/](cli-\S+\.v8cache)/.exec(again)?.[1];
    expect(again).not.toContain("wrote");
    expect(servedFile).toBeDefined();
    expect(execFile).toBeDefined();
    expect(servedFile).not.toBe(execFile);
    // A V8 flag node is started with (here through NODE_OPTIONS, as operators set a heap size) is part
    // of what a cache is checked against too: that process keeps its own, and the others stay.
    const withHeap = await execWithCache(cacheDir, { NODE_OPTIONS: "--max-old-space-size=2048" });
    expect(withHeap).toMatch(/\[codecell:code-cache\] no cache yet at /);
    expect(await execWithCache(cacheDir, { NODE_OPTIONS: "--max-old-space-size=2048" })).not.toContain(
      "wrote",
    );
    expect(await execWithCache(cacheDir)).not.toContain("wrote");
    const tagOf = (name: string) => /-v8-([0-9a-f]+)\.v8cache$/.exec(name)?.[1];
    const files = cacheFiles(cacheDir);
    expect(
      files
        .filter((name) => name.startsWith("cli-"))
        .map(tagOf)
        .sort(),
    ).toHaveLength(3);
    expect(new Set(files.filter((name) => name.startsWith("cli-")).map(tagOf)).size).toBe(3);
    // The in-thread sandbox's, one per one-shot set of flags, under the same tags as exec's.
    const guestTags = files.filter((name) => name.startsWith("sandbox-")).map(tagOf);
    expect(guestTags).toHaveLength(2);
    expect(guestTags).toContain(tagOf(execFile!));
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
    // This build's bundle hash, from the name of a cache it writes.
    const probe = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    await execWithCache(probe);
    const hash = /^cli-([0-9a-f]{16})-/.exec(cacheFiles(probe).find((name) => name.startsWith("cli-"))!)![1];
    const node = `node${process.versions.node}-${process.arch}`;
    const stale = [
      "cli-0123456789abcdef-node0.0.0-x64.v8cache",
      "cli-0123456789abcdef-node0.0.0-x64-serve.v8cache",
      "cli-0123456789abcdef-node0.0.0-x64-v8-1234abcd.v8cache",
      // This build's, named as before the V8 tag was part of the name.
      `cli-${hash}-${node}-one-shot.v8cache`,
      `cli-${hash}-${node}-serve.v8cache`,
      `sandbox-in-thread.bundle.0123456789abcdef-${node}-one-shot.v8cache`,
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

// Node's built-ins carry code caches too, made under V8's default flags, and V8 refuses a cache made under
// other flags: a built-in the CLI first loads after setting its V8 flags is compiled from source, three
// to four times the cost (src/cli/cli-entry.ts loads the start-up's built-ins before the flags). Two
// witnesses: node's --profile-deserialization makes V8 print a line on stdout for every cache it
// refuses, on any thread (and is not one of the flags a cache is checked against); the code-cache debug
// switch names the built-ins the main thread loaded after the flags.
const PROFILE = ["--profile-deserialization"];
const REFUSED = "[Cached code failed check]";
const LATE = "Node built-ins loaded after the V8 flags";
/** V8's lines on stdout (each in brackets, alone on its line), apart from the command's own output. */
const V8_LINE = /^\[.*\]$/;
function withoutV8Lines(stdout: string): string {
  return stdout
    .split("\n")
    .filter((line) => !V8_LINE.test(line))
    .join("\n");
}

/**
 * `codecell <args>` with the code cache in `cacheDir`, once to write the CLI's caches (a first start
 * offers V8 the cache the sandbox ships, which it refuses under the CLI's flags, and then keeps its own),
 * then again with the debug switch, under --profile-deserialization when `profile`.
 */
async function secondStart(
  cacheDir: string,
  args: string[],
  options: { input?: string; profile?: boolean } = {},
) {
  const env = { CODECELL_CACHE_DIR: cacheDir };
  const first = await runCli(args, { input: options.input, env });
  expect(first.code, first.stderr).toBe(0);
  const run = await runCli(args, {
    input: options.input,
    env: { ...env, CODECELL_DEBUG_CODE_CACHE: "1" },
    nodeArgs: options.profile ? PROFILE : [],
  });
  expect(run.code, `${run.stderr}${run.stdout}`).toBe(0);
  // The flag works here: V8 reported the snapshot it started from.
  if (options.profile) expect(run.stdout).toMatch(/^\[Deserializing /m);
  return { refused: run.stdout.includes(REFUSED), output: withoutV8Lines(run.stdout), stderr: run.stderr };
}

describe("the code caches of Node's own modules", () => {
  it("are refused after a V8 flag is set, and the debug switch names a late one: the controls", async () => {
    const run = (program: string) =>
      spawnSync(process.execPath, [...PROFILE, "-e", program], { encoding: "utf8" }).stdout;
    expect(run('require("node:http")')).not.toContain(REFUSED);
    const flagged =
      'require("node:v8").setFlagsFromString("--wasm-num-compilation-tasks=1"); require("node:http")';
    expect(run(flagged)).toContain(REFUSED);

    // A plugin's own built-in loads after the flags, and is named.
    const setup = makeSetup({
      tools: { codeMode: { enabled: true } },
      plugins: [{ module: "./plugin.mjs" }],
    });
    writeFileSync(
      join(setup.dir, "plugin.mjs"),
      `import "node:readline";
      export function createPlugin() {
        return { id: "probe", tools: [{ name: "one", description: "One.",
          parameters: { type: "object", properties: {} }, execute: () => 1 }] };
      }`,
    );
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    const exec = await secondStart(cacheDir, ["exec", "--config", setup.configPath, "--code", "return 1"], {
      profile: true,
    });
    expect(exec.stderr).toMatch(new RegExp(`${LATE}, compiled without their code cache: .*\\breadline\\b`));
    expect(exec.refused).toBe(true);
  });

  it("are all taken by exec, serve and serve --http, and so are the CLI's own", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "codecell-code-cache-"));
    // exec of a cell read from stdin, with a plugin tool. exec runs no worker thread, so V8's report
    // covers everything the process compiled.
    const plugin = pluginSetup();
    const args = ["exec", "--config", plugin.configPath, "-"];
    const execPlugin = await secondStart(cacheDir, args, { input: CELL, profile: true });
    expect(JSON.parse(execPlugin.output)).toMatchObject({ status: "completed", value: [2, 4, 6] });
    expect(execPlugin.stderr).not.toContain(LATE);
    expect(execPlugin.refused, execPlugin.stderr).toBe(false);

    // serve over stdio: a session that lists the tools and runs a cell (close waits for the exit).
    const stdio = await connectStdio(plugin.configPath, {
      env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect((await stdio.client.listTools()).tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    expect(await callCodeMode(stdio.client, "exec", { code: CELL })).toMatchObject({ value: [2, 4, 6] });
    await stdio.close();
    expect(stdio.stderr()).toContain("[codecell:code-cache]");
    expect(stdio.stderr()).not.toContain(LATE);

    // serve --http: Node's HTTP stack loads as it starts; then a health check, an MCP session that
    // lists the tools and runs a cell (the SDK makes its stream ids with Web Crypto), and a stop.
    const gateway = await startHttpGateway(plugin.configPath, {
      env: { CODECELL_CACHE_DIR: cacheDir, CODECELL_DEBUG_CODE_CACHE: "1" },
    });
    expect((await fetch(`${gateway.url}healthz`)).status).toBe(200);
    const session = await connectHttp(gateway.mcpUrl);
    expect((await session.client.listTools()).tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    expect(await callCodeMode(session.client, "exec", { code: CELL })).toMatchObject({ value: [2, 4, 6] });
    await session.close();
    expect(await gateway.stop()).toBe(0);
    expect(gateway.output()).toContain("[codecell:code-cache]");
    expect(gateway.output()).not.toContain(LATE);
  });
});
