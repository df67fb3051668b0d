/**
 * What the bundled CLI gets from its start-up file (src/cli-entry.ts). scripts/bundle-cli.mjs replaces
 * this module in the bundle with the start-up file's own functions; unbundled (the library, the tests
 * that import the gateway) these are used.
 */

import type { InThreadCodeCacheStore } from "@codecell/sandbox";

/**
 * Imports an ES module by URL (a plugin). In the bundle it is the start-up file's `import()`: the bundle
 * runs as a script compiled with V8's code cache, where `import()` has no module loader behind it.
 */
export function importModule(url: string): Promise<Record<string, unknown>> {
  return import(url) as Promise<Record<string, unknown>>;
}

/**
 * Writes the CLI's code cache now, with what the start-up path has compiled so far, if it needs writing
 * (there was none, or V8 rejected it). The commands call it once their start-up path has run, so the
 * cache holds that path; unbundled there is no cache and it does nothing.
 */
export function saveCodeCache(): void {}

/**
 * Where the in-thread sandbox keeps its code cache in this process (the start-up file keeps it beside
 * the CLI's own, under the CLI's V8 flags); unbundled, none: the sandbox uses the one it ships.
 */
export const codeCacheStore: InThreadCodeCacheStore | null = null;
