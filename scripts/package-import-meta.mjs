// Bundled into the builds of scripts/workspace-bundle.mjs (the gateway's dist/cli-main.js, the
// engine's dist/bundle/) and never run on its own: what each inlined `@codecell/*` module gets as its
// `import.meta`. Those modules find files relative to themselves: the libraries they load on demand
// through `createRequire(import.meta.url)` (zod, MiniSearch, better-sqlite3, ioredis, TypeScript) resolve
// from the package that depends on them. Inside a bundle, `import.meta.url` must therefore still name the
// module's file in its installed package, wherever the package manager put it, which only the running
// process can know: each package is found the way Node finds it, from the bundle's own package (or, for
// one that package does not depend on directly, from the package that does), and the module's file is
// located relative to that package's main file.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/** Each package's main file URL, by its dependency chain from the bundle's package, resolved on first use. */
const mains = new Map();

function mainFileUrl(chain) {
  const key = chain.join(" ");
  let url = mains.get(key);
  if (url === undefined) {
    // In the bundle, this module's own `import.meta.url` is the bundle's file (or the file that runs it).
    url = import.meta.url;
    for (const name of chain) url = pathToFileURL(createRequire(url).resolve(name)).href;
    mains.set(key, url);
  }
  return url;
}

/**
 * The `import.meta` of an inlined module: `chain` is how Node reaches its package from the bundle's
 * package (the package names, in order), `fromMain` the module's path relative to that package's main
 * file. `url` is resolved when read, so a module that never reads it never resolves its package.
 */
export function packageImportMeta(chain, fromMain) {
  return {
    get url() {
      return new URL(fromMain, mainFileUrl(chain)).href;
    },
  };
}
