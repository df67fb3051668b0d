#!/usr/bin/env node
// The `codecell` command's start-up file: scripts/bundle-cli.mjs builds it into dist/cli.js, beside the
// bundled CLI itself (dist/cli-bundle.cjs: src/cli.ts, the `@codecell/*` packages and the third-party
// dependencies). It exists for
// the time from process start to the first `tools/list` and the first exec result:
//
// 1. The sandbox starts booting its first worker and compiling QuickJS before anything else loads, so
//    the worker's start overlaps the main thread's own loading instead of following it.
// 2. The bundle is compiled through `vm.Script` with V8's code cache kept on disk. Node 20 has no compile
//    cache of its own: compiling the 1.7 MB bundle, and then each function it runs, was a fifth of the
//    way to `tools/list`. The cache is an optimisation only: a missing, unreadable, unwritable or
//    rejected cache means the bundle is compiled from source, as without it.
import {
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";
import { userCacheDir } from "../config/data-dir.js";

/** Written by scripts/bundle-cli.mjs when it builds this file, from the bundle it built beside it. */
declare const CLI_BUNDLE: {
  /** The bundle's file name, beside this file. */
  file: string;
  /** Its SHA-256 (hex) and length in bytes (it is ASCII, so also in characters). */
  sha256: string;
  length: number;
  /** The packages it leaves to Node, by name, and requires at load: the sandbox's worker start. */
  externals: string[];
};

/** The bundle is a function expression taking these, in this order (the build's banner). */
type BundleFunction = (
  exports: object,
  require: (id: string) => unknown,
  module: { exports: object },
  filename: string,
  dirname: string,
  entryUrl: string,
  host: typeof import("./cli-host.js"),
) => void;

/** The CLI bundle's caches, of this build or another: the hash of the bundle is the first part. */
const CLI_CACHE_FILE = /^cli-([0-9a-f]{16})-.+\.v8cache$/;
/** The in-thread sandbox's caches this CLI keeps for it (see the host's codeCacheStore below). */
const GUEST_CACHE_PREFIX = "sandbox-";

const debugCache = process.env.CODECELL_DEBUG_CODE_CACHE === "1";
function cacheNote(message: string): void {
  if (debugCache) process.stderr.write(`[codecell:code-cache] ${message}\n`);
}

/**
 * The end of every cache name this process reads or writes, once the V8 flags below are set: the Node
 * version and architecture, and V8's cache tag. V8 takes a cache only under the flags it was made with,
 * and its tag changes with them: with the ones this file sets (which differ for `serve`), and with any
 * that node was started with (`NODE_OPTIONS=--max-old-space-size=...` is one). So each set of flags
 * keeps caches of its own, and running under one after the other rewrites neither.
 */
function cacheNameEnd(): string {
  return `-node${process.versions.node}-${process.arch}-v8-${v8.cachedDataVersionTag().toString(16)}.v8cache`;
}

/**
 * Where this bundle's code cache lives, or null when it is off (`CODECELL_CODE_CACHE=0`). The name holds
 * the bundle's hash: V8 checks only the source's length and its own version and flags, so a changed
 * bundle of the same length must never meet an old cache.
 */
function codeCacheFile(nameEnd: string): string | null {
  if (process.env.CODECELL_CODE_CACHE === "0") return null;
  return join(userCacheDir(), `cli-${CLI_BUNDLE.sha256.slice(0, 16)}${nameEnd}`);
}

/**
 * A whole file's bytes, read into `spare` when they fit (else into a new buffer), as a view of that
 * buffer. Fresh memory is what reading costs on some machines, not the copy: see compileBundle.
 */
function readWholeFile(file: string, spare?: Buffer): Buffer {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    const buffer = spare !== undefined && spare.length >= size ? spare : Buffer.allocUnsafeSlow(size);
    let read = 0;
    while (read < size) {
      const count = readSync(fd, buffer, read, size - read, read);
      if (count === 0) break;
      read += count;
    }
    return buffer.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** The cache's bytes, read into `spare` when they fit, or undefined when there is no readable cache. */
function readCache(file: string, spare?: Buffer): Buffer | undefined {
  try {
    return readWholeFile(file, spare);
  } catch {
    return undefined;
  }
}

/**
 * Writes a cache atomically (another CLI may read it meanwhile) and drops the files `stale` names in its
 * folder (the caches of other builds).
 */
function writeCache(file: string, data: Uint8Array, stale: (name: string) => boolean): void {
  try {
    const dir = dirname(file);
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, data);
    renameSync(partial, file);
    for (const name of readdirSync(dir)) {
      if (join(dir, name) !== file && stale(name)) rmSync(join(dir, name), { force: true });
    }
    cacheNote(`wrote ${file} (${data.length} bytes)`);
  } catch (error) {
    cacheNote(`could not write ${file}: ${(error as Error).message}`);
  }
}

/** How the name of a cache ends since it holds V8's cache tag (see cacheNameEnd). */
const TAGGED_CACHE_END = /-v8-[0-9a-f]+\.v8cache$/;

/** A cache of the CLI's bundle made from another build than this one, or named as before the V8 tag. */
function otherBuildsCache(name: string): boolean {
  const hash = CLI_CACHE_FILE.exec(name)?.[1];
  return hash !== undefined && (hash !== CLI_BUNDLE.sha256.slice(0, 16) || !TAGGED_CACHE_END.test(name));
}

/**
 * The in-thread sandbox's code cache, kept beside the bundle's (@codecell/sandbox's
 * useInThreadCodeCacheStore): the one the sandbox ships was made without the V8 flags set below, and V8
 * refuses it here. Its key names the sandbox bundle's exact text; a newer one replaces the others kept
 * under the same flags, and those named as before the V8 tag. Null when the code cache is off.
 */
function guestCodeCacheStore(nameEnd: string): {
  read(key: string): Uint8Array | undefined;
  write(key: string, data: Uint8Array): void;
} | null {
  if (process.env.CODECELL_CODE_CACHE === "0") return null;
  const fileOf = (key: string) =>
    join(userCacheDir(), `${GUEST_CACHE_PREFIX}${key.replace(/\.v8cache$/, "")}${nameEnd}`);
  return {
    read: (key) => {
      const data = readCache(fileOf(key));
      if (data !== undefined) cacheNote(`read ${fileOf(key)}`);
      return data;
    },
    write: (key, data) =>
      writeCache(
        fileOf(key),
        data,
        (name) =>
          name.startsWith(GUEST_CACHE_PREFIX) && (name.endsWith(nameEnd) || !TAGGED_CACHE_END.test(name)),
      ),
  };
}

const nodeRequire = createRequire(import.meta.url);

/**
 * Node's built-in modules that the commands' start-up paths load, loaded here before the V8 flags below
 * are set. Node's built-ins come with code caches made under V8's default flags, and V8 takes a cache
 * only under the flags it was made with: a built-in first loaded after `setFlagsFromString` is compiled
 * from source, at three to four times the cost (node:http 1.5 → 4.9 ms here; the 18 modules `codecell
 * exec` loaded after the flags, 1.6 → 5.1 ms). Every command loads these (the bundle's own requires,
 * the args parser); `serve --http` also loads Node's whole HTTP stack as it starts, 25 ms more from
 * source. What only some runs need stays where it is first used, as node:child_process waits for the
 * first MCP server spawned. test/code-cache.e2e.test.ts fails when a start-up loads one after the flags.
 */
const STARTUP_BUILTINS = ["node:crypto", "node:fs/promises", "node:timers/promises"];
const HTTP_SERVE_BUILTINS = [
  "node:http",
  "node:https",
  "node:http2",
  "node:zlib",
  "node:assert",
  "node:dns",
  "node:cluster",
  "node:process",
];

function loadStartupBuiltins(): void {
  for (const name of STARTUP_BUILTINS) nodeRequire(name);
  // These load on first use of what names them: util.parseArgs, the `performance` global (all of
  // perf_hooks), and each stdio stream (made for what its descriptor is: a pipe, a terminal or a file).
  void (nodeRequire("node:util") as typeof import("node:util")).parseArgs;
  void globalThis.performance;
  void process.stdout;
  void process.stderr;
  if (!longLived || !args.some((arg) => arg === "--http" || arg.startsWith("--http="))) return;
  for (const name of HTTP_SERVE_BUILTINS) nodeRequire(name);
  // Node's fetch (undici), which the HTTP transport's requests and responses are made of, and Web
  // Crypto, which the MCP SDK's HTTP transport makes its stream ids with.
  void globalThis.Response;
  void globalThis.crypto;
}

/** V8's default `--wasm-tiering-budget` (1,800,000 in Node 20's V8) times 100, for one-shot commands. */
const ONE_SHOT_WASM_TIERING_BUDGET = 180_000_000;

// The command line as the start-up reads it, before the bundle parses it. Only one word matters here,
// read on the safe side: an argument `serve` anywhere (even an option's value) means a long-lived
// process, the one command that runs cells on the sandbox's worker threads by default.
const args = process.argv.slice(2);
const longLived = args.includes("serve");
/** `exec --sandbox worker` runs its cell on a worker thread, like `serve`: both want the early worker. */
const workerCells = longLived || (args.includes("exec") && args.includes("worker"));

// 1. The sandbox's early worker starts as this module loads (see @codecell/sandbox): three small modules,
// before the rest of the sandbox and everything else. Only `serve` (and `exec --sandbox worker`) starts it: `exec` runs its one cell
// on this thread (the sandbox's in-thread mode, see cli.ts), and a command that runs no cell (`catalog`,
// `check`, help) needs no worker; a worker thread booting beside them took CPU from them, and their exit
// waited for the thread. The sandbox's own switch turns it off, for this import only (children never
// see it).
const earlyStartSetting = process.env.CODECELL_SANDBOX_EARLY_START;
if (!workerCells) process.env.CODECELL_SANDBOX_EARLY_START = "0";
try {
  const sandboxStart = await import("@codecell/sandbox/worker-start");
  // `exec` runs its cell on this thread, and with no early worker nothing started compiling QuickJS
  // until the bundle had loaded and the engine made its sandbox. Started here, V8 compiles it on its own
  // threads while this one loads node:v8 and compiles and runs the bundle: 1.6-2.3 ms sooner to the
  // result of `codecell exec` (medians of 41-81 alternated runs), where starting it after the flags
  // below gained nothing measurable. The one-shot tiering budget set below still holds for it: a hot
  // cell's wait at exit is the same. The sandbox's pool awaits the same promise and reports a failure.
  if (!workerCells && args.includes("exec")) sandboxStart.loadQuickJsModule().catch(() => {});
} finally {
  if (earlyStartSetting === undefined) delete process.env.CODECELL_SANDBOX_EARLY_START;
  else process.env.CODECELL_SANDBOX_EARLY_START = earlyStartSetting;
}
loadStartupBuiltins();
// V8 tiers QuickJS's hot wasm functions up to TurboFan on background threads, as many at once as its
// platform has threads (four in Node), and on a small machine those compiles take the cores from the
// sandbox's worker running its first cells and from this thread answering the client: in `codecell
// serve` they overlap the first exec. One compile at a time leaves the other core to the threads doing
// the work; what is compiled, and its speed once compiled, are the same. Set here, after the worker
// start: loaded first, node:v8 (~1-2 ms) would delay the worker's spawn. A flag of the whole process,
// which the CLI owns; the library packages never set one.
const v8 = nodeRequire("node:v8") as typeof import("node:v8");
v8.setFlagsFromString("--wasm-num-compilation-tasks=1");
// A one-shot command (everything but `serve`) also raises the budget after which V8 recompiles a hot
// QuickJS function with TurboFan, a hundredfold. A process cannot exit while such a compile is running
// (Node waits for V8's compile threads), and a first cell sets off compiles of QuickJS's interpreter
// taking 100-200 ms here, whose code the command then never runs: `codecell exec` of `return 1` printed its
// result and then waited that long to exit. A cell that computes for long still reaches the budget and is
// compiled. `serve` keeps V8's default: its cells run for the life of the process.
if (!longLived) v8.setFlagsFromString(`--wasm-tiering-budget=${ONE_SHOT_WASM_TIERING_BUDGET}`);
if (debugCache) reportLateBuiltins();

/** Under the code-cache debug switch, names at exit the built-ins first loaded after the V8 flags. */
function reportLateBuiltins(): void {
  const before = new Set(builtinsLoaded());
  process.on("exit", () => {
    const late = builtinsLoaded().filter((name) => !before.has(name));
    if (late.length > 0)
      cacheNote(
        `Node built-ins loaded after the V8 flags, compiled without their code cache: ${late.join(", ")}`,
      );
  });
}

/** The built-in modules this thread has loaded, from Node's own (undocumented) diagnostic list. */
function builtinsLoaded(): string[] {
  const list = (process as { moduleLoadList?: string[] }).moduleLoadList ?? [];
  const prefix = "NativeModule ";
  return list.filter((entry) => entry.startsWith(prefix)).map((entry) => entry.slice(prefix.length));
}

// The packages the bundle leaves external, loaded as the ES modules they are (the worker start, already
// loaded above, so the bundle's copy of the sandbox shares its state); the bundle gets them by name.
const externals = new Map<string, unknown>(
  await Promise.all(CLI_BUNDLE.externals.map(async (name) => [name, await import(name)] as const)),
);

// 2. The bundle, compiled with the code cache when there is one for it.
const bundleFile = fileURLToPath(new URL(CLI_BUNDLE.file, import.meta.url));

/**
 * Compiles the bundle; `save` writes the cache when it needs writing (the commands call it once their
 * start-up path has run, so the functions it compiled are in it). In a function so that the cache's
 * bytes are garbage once compiled, not kept for the life of the process.
 */
function compileBundle(): { script: Script; save: () => void } {
  // ASCII by construction (the build checks), so read without UTF-8 decoding, into a one-byte string.
  const bytes = readWholeFile(bundleFile);
  const source = bytes.toString("latin1");
  // A bundle that is not the one this file was built with neither uses nor writes a cache.
  const cacheFile = source.length === CLI_BUNDLE.length ? codeCacheFile(cacheNameEnd()) : null;
  // The cache is read into the buffer the bundle's bytes were read into (the string is a copy of them),
  // not into a new one: touching fresh memory costs ~4 µs of CPU per KB where memory is slow to map in
  // (this project's 2-core VM), and this saves ~0.9 MB of it. V8 reads the cache only inside `new Script`.
  const cachedData = cacheFile === null ? undefined : readCache(cacheFile, bytes);
  const script = new Script(source, { filename: bundleFile, ...(cachedData ? { cachedData } : {}) });
  if (cacheFile === null) return { script, save: () => {} };
  if (cachedData && !script.cachedDataRejected) {
    cacheNote(`used ${cacheFile}`);
    return { script, save: () => {} };
  }
  cacheNote(cachedData ? `V8 rejected ${cacheFile}; it is rewritten` : `no cache yet at ${cacheFile}`);
  let saved = false;
  return {
    script,
    save: () => {
      if (saved) return;
      saved = true;
      writeCache(cacheFile, script.createCachedData(), otherBuildsCache);
    },
  };
}

const { script, save: saveCodeCache } = compileBundle();
const bundle = script.runInThisContext() as BundleFunction;
const module = { exports: {} };
bundle(
  module.exports,
  (id) => (externals.has(id) ? externals.get(id) : nodeRequire(id)),
  module,
  bundleFile,
  dirname(bundleFile),
  // The bundle's `import.meta.url` is this file's, as it was when the CLI was one ES module here.
  import.meta.url,
  {
    importModule: (url) => import(url),
    saveCodeCache,
    codeCacheStore: guestCodeCacheStore(cacheNameEnd()),
  },
);
