// @ts-check
// Loads the TypeScript compiler with V8's code cache kept on disk: Node 20 has no compile cache of its
// own, and compiling the compiler's 9 MB of JavaScript was about 200 ms of CPU of every first check here.
// The cache is an optimisation only: a missing, unreadable, unwritable or rejected cache means the
// compiler is compiled from source, as a plain require does. It lives where the gateway keeps its own
// (CODECELL_CACHE_DIR, else the user's cache folder), and CODECELL_CODE_CACHE=0 turns it off.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire, Module } from "node:module";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
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
 * The compiler module, and `save()`, which writes the cache once (call it after the first check, so
 * the functions that check compiled are in it). `require` resolves `typescript` as the caller does.
 * @param {NodeRequire} require
 * @returns {{ ts: import("typescript"); save(): void }}
 */
export function loadCompiler(require) {
  const file = require.resolve("typescript");
  if (process.env.CODECELL_CODE_CACHE === "0") return { ts: require("typescript"), save() {} };
  const { version } = require("typescript/package.json");
  // V8 checks only the source's length and its own version: the name holds what else must match.
  const cacheFile = join(
    userCacheDir(),
    `typescript-${version}-node${process.versions.node}-${process.arch}.v8cache`,
  );
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
  let saved = cached !== undefined && !script.cachedDataRejected;
  return {
    ts: /** @type {import("typescript")} */ (module.exports),
    save() {
      if (saved) return;
      saved = true;
      try {
        mkdirSync(dirname(cacheFile), { recursive: true });
        // Written whole, then renamed: another process may be reading it meanwhile.
        const partial = `${cacheFile}.${process.pid}.${Date.now()}.tmp`;
        writeFileSync(partial, script.createCachedData());
        renameSync(partial, cacheFile);
      } catch {
        // No cache this time; the next process compiles from source again.
      }
    },
  };
}
