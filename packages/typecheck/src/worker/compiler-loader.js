// @ts-check
// Loads the TypeScript compiler with V8's code cache kept on disk: Node 20 has no compile cache of its
// own, and compiling the compiler's 9 MB of JavaScript was about 200 ms of CPU of every first check here.
// The cache is an optimisation only: a missing, unreadable, unwritable or rejected cache means the
// compiler is compiled from source, as a plain require does. It lives where the gateway keeps its own
// (CODECELL_CACHE_DIR, else the user's cache folder), and CODECELL_CODE_CACHE=0 turns it off.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire, Module } from "node:module";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { cachedDataVersionTag } from "node:v8";
import { Script } from "node:vm";

function userCacheDir() {
  if (process.env.CODECELL_CACHE_DIR) return process.env.CODECELL_CACHE_DIR;
  if (process.platform === "win32") {
    return join(process.env.LOCALAPPDATA || join(homedir(), "AppData", "Local"), "codecell", "cache");
  }
  if (process.platform === "darwin") return join(homedir(), "Library", "Caches", "codecell");
  const xdg = process.env.XDG_CACHE_HOME;
  return join(xdg?.startsWith("/") ? xdg : join(homedir(), ".cache"), "codecell");
}

/**
 * The cache file's name for this TypeScript in this process. V8 checks only the source's length and
 * its own tag, which covers its version, the CPU's features and the V8 flags the process runs with; the
 * name holds the rest, and that tag. A process under other flags (the gateway's CLI sets its own, and
 * `serve` others than `exec`) keeps a cache of its own, instead of refusing the other's and writing over
 * it on every start.
 * @param {string} version
 */
function cacheName(version) {
  const tag = cachedDataVersionTag().toString(16);
  return `typescript-${version}-node${process.versions.node}-${process.arch}-v8-${tag}.v8cache`;
}

/**
 * Whether `name` is a cache this TypeScript and Node on this architecture will never read: another
 * version's, or one named before the V8 tag was part of the name. Caches under other flags are kept.
 * @param {string} name
 * @param {string} version
 */
function staleCache(name, version) {
  const match = /^typescript-(.+)-node([^-]+)-([^-]+?)(-v8-[0-9a-f]+)?\.v8cache$/.exec(name);
  if (match === null || match[3] !== process.arch) return false;
  return match[1] !== version || match[2] !== process.versions.node || match[4] === undefined;
}

/**
 * The compiler module, and `save()`, which writes the cache once (call it after the first check, so
 * the functions that check compiled are in it). `require` resolves `typescript` as the caller does.
 * `cache` says what was done with the cache: "used", "rejected" (V8 refused it; `save` rewrites it),
 * "none" (there was none) or "off".
 * @param {NodeRequire} require
 * @returns {{ ts: import("typescript"); save(): void; cache: "used" | "rejected" | "none" | "off" }}
 */
export function loadCompiler(require) {
  const file = require.resolve("typescript");
  if (process.env.CODECELL_CODE_CACHE === "0") return { ts: require("typescript"), save() {}, cache: "off" };
  const { version } = require("typescript/package.json");
  const cacheDir = userCacheDir();
  const cacheFile = join(cacheDir, cacheName(version));
  /** @type {Buffer | undefined} */
  let cached;
  try {
    cached = readFileSync(cacheFile);
  } catch {
    cached = undefined;
  }
  const source = readFileSync(file, "utf8");
  const script = new Script(Module.wrap(source), {
    filename: file,
    ...(cached ? { cachedData: cached } : {}),
  });
  const wrapper = script.runInThisContext();
  const module = { exports: {}, filename: file, id: file, loaded: false };
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  module.loaded = true;
  const cache = cached === undefined ? "none" : script.cachedDataRejected ? "rejected" : "used";
  let saved = cache === "used";
  return {
    ts: /** @type {import("typescript")} */ (module.exports),
    cache,
    save() {
      if (saved) return;
      saved = true;
      try {
        mkdirSync(cacheDir, { recursive: true });
        // Written whole, then renamed: another process may be reading it meanwhile.
        const partial = `${cacheFile}.${process.pid}.${Date.now()}.tmp`;
        writeFileSync(partial, script.createCachedData());
        renameSync(partial, cacheFile);
        for (const name of readdirSync(cacheDir)) {
          if (staleCache(name, version)) rmSync(join(cacheDir, name), { force: true });
        }
      } catch {
        // No cache this time; the next process compiles from source again.
      }
    },
  };
}
