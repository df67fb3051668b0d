// Run by `build` after tsc (cold start): the package's published entry, dist/bundle/, is the
// engine with the `@codecell/*` packages it uses inlined. Node's ES module loader resolves, reads,
// compiles and links each file on its own; importing the engine from dist/index.js meant some 80 of
// them (about 410 KB), most of the main thread's time to a first result. And Node 20 keeps no compile
// cache for ES modules: compiling the engine as one ES module was still about 20 ms of a 35 ms import.
// So the bundle is:
//
// - dist/bundle/engine-api.cjs: src/index.ts as built, the packages below the engine included, as one
//   function expression (CommonJS inside), which the entry compiles through `vm.Script` with the code
//   cache beside it. Its `import()` calls become calls of the entry's own `import()` (a script compiled
//   by node:vm has no module loader behind it).
// - dist/bundle/engine-api.<hash>.v8cache: V8's code cache of that script, written by a process that
//   ran cells with it (scripts/warm-code-cache.mjs), so the functions a first cell runs are in it too.
//   V8 takes it only in a process of the same Node and V8 flags; elsewhere the source is compiled.
// - dist/bundle/index.js: the entry, written here with the names src/index.ts exports. Its static import
//   of @codecell/sandbox/worker-start runs first (the sandbox's first worker and its wasm start as that
//   loads), so the worker boots on the other core while the engine compiles.
//
// Left outside, loaded by name as the ES modules they are:
// - @codecell/sandbox/worker-start, for the process's one copy of the sandbox's state (the rules of
//   the repository's scripts/workspace-bundle.mjs, which the gateway's CLI bundle follows as well);
// - @codecell/transpile (acorn, the TypeScript transformer): the engine imports it only on the paths
//   that need it (a TypeScript-only cell, a failure hint), so it must stay a lazy load; the build fails
//   if anything imports it statically.
// Third-party libraries are loaded on demand through `createRequire` (zod, MiniSearch, better-sqlite3,
// ioredis), never imported statically on this path; the build fails if one is.
//
// Hosts that import other `@codecell/*` packages beside the engine (namespaces to register plugins'
// namespaces, contract for CodeModeError) get second copies of them; what must be shared between copies
// is kept process-wide under registry symbols (the namespace registry and tool markers, CodeModeError's
// brand and its `instanceof`). test/bundle.e2e.test.ts runs such a host against this bundle.
import { createHash } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { build, transform } from "esbuild";
import {
  checkWorkerStartExports,
  dependencyChains,
  inlinedImportMeta,
  routeDynamicImports,
  runWarmUp,
  sandboxStateFromWorkerStart,
  WORKER_START,
  workspacePackages,
} from "../../../scripts/workspace-bundle.mjs";

const packageDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", packageDir), "utf8"));
/** Imported only dynamically, on the paths that need it. */
const LAZY_PACKAGES = ["@codecell/transpile", "@codecell/typecheck"];
const API_FILE = "engine-api.cjs";
/** The bundle's parameters; the entry calls it with these, in this order. */
const BUNDLE_PARAMETERS = [
  "exports",
  "require",
  "module",
  "__filename",
  "__dirname",
  "__codecellEntryUrl",
  "__codecellImport",
];
/** acorn's tokenizer, from @codecell/transpile (which depends on it): import() calls are found as tokens. */
const acorn = createRequire(createRequire(import.meta.url).resolve("@codecell/transpile"))("acorn");

const packages = workspacePackages();

/** Keeps WORKER_START and the lazy packages external; refuses any other bare import but node's. */
const externals = {
  name: "engine-externals",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path === WORKER_START || LAZY_PACKAGES.includes(args.path))
        return { path: args.path, external: true };
      if (args.path.startsWith("node:") || args.path.startsWith("@codecell/")) return undefined;
      throw new Error(
        `${args.importer} imports ${args.path} statically; third-party libraries load on demand (createRequire) or the bundle needs them outside`,
      );
    });
  },
};

await checkWorkerStartExports(packages, build);

/** The values dist/index.js exports (its types have no JavaScript), as esbuild reads them. */
async function exportsOf(file) {
  const result = await build({
    absWorkingDir: fileURLToPath(packageDir),
    entryPoints: [file],
    bundle: false,
    write: false,
    metafile: true,
    format: "esm",
    outdir: "out",
    logLevel: "silent",
  });
  return Object.values(result.metafile.outputs).find((output) => output.entryPoint)?.exports ?? [];
}

const apiNames = await exportsOf("dist/index.js");
if (apiNames.length === 0) throw new Error("dist/index.js exports nothing; build it with tsc first");

const bundleDir = new URL("dist/bundle/", packageDir);
// A build's files only: an earlier layout's, and the code caches of earlier builds, go.
rmSync(bundleDir, { recursive: true, force: true });

// 1. The engine itself, one function expression (CommonJS inside).
const result = await build({
  absWorkingDir: fileURLToPath(packageDir),
  entryPoints: ["dist/index.js"],
  outfile: `dist/bundle/${API_FILE}`,
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  // The engine's own modules find files beside the entry, as they did beside their own files.
  define: { "import.meta.url": "__codecellEntryUrl" },
  // Its code was ES modules (strict) before it was bundled; it stays strict inside the function.
  banner: { js: `(function (${BUNDLE_PARAMETERS.join(", ")}) {"use strict";` },
  footer: { js: "})" },
  // Names and layout stay as written: readable stack traces for a library; comments go, and with them
  // the only place non-ASCII could stay (esbuild escapes it in code), so the entry reads it as latin1.
  legalComments: "none",
  charset: "ascii",
  sourcemap: true,
  sourcesContent: false,
  metafile: true,
  plugins: [
    externals,
    sandboxStateFromWorkerStart(packages),
    inlinedImportMeta({
      packages,
      chains: dependencyChains(packages, Object.keys(manifest.dependencies)),
      transform,
      inPlace: manifest.name,
      bundleName: manifest.name,
    }),
  ],
  logLevel: "warning",
});

const output = result.metafile.outputs[`dist/bundle/${API_FILE}`];
for (const imported of output.imports) {
  if (imported.path.startsWith("node:")) continue;
  const allowed =
    (imported.path === WORKER_START && imported.kind === "require-call") ||
    (LAZY_PACKAGES.includes(imported.path) && imported.kind === "dynamic-import");
  if (!allowed) {
    throw new Error(
      `dist/bundle/${API_FILE} loads ${imported.path} as ${imported.kind}; only ${WORKER_START} (required at load) and ${LAZY_PACKAGES.join(", ")} (import()) may stay outside`,
    );
  }
}

// 2. Its import() calls go through the entry: a script compiled by node:vm has no module loader of its
// own (an import() in it fails "A dynamic import callback was not specified"). Found as tokens, so a
// string that happens to hold the text is left alone.
const apiUrl = new URL(API_FILE, bundleDir);
const rewritten = routeDynamicImports(readFileSync(apiUrl, "latin1"), {
  acorn,
  name: "__codecellImport",
  minimum: output.imports.filter((imported) => imported.kind === "dynamic-import").length,
});
if ([...rewritten].some((char) => char.charCodeAt(0) > 0x7f)) {
  throw new Error(`dist/bundle/${API_FILE} is not ASCII; the entry reads it as latin1`);
}
writeFileSync(apiUrl, rewritten);

// 3. The entry: the sandbox's early start, then the engine compiled with its code cache.
const sha = createHash("sha256").update(rewritten).digest("hex").slice(0, 16);
const api = { file: `./${API_FILE}`, length: rewritten.length, cache: `./engine-api.${sha}.v8cache` };
writeFileSync(new URL("index.js", bundleDir), engineEntry(api, apiNames));

// 4. The code cache, from a process that ran cells with the bundle just built (a process with other V8
// flags or another Node rejects it and compiles the source, as without it).
const warmed = runWarmUp(
  fileURLToPath(new URL("warm-code-cache.mjs", import.meta.url)),
  fileURLToPath(packageDir),
);
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`engine bundle: ${inputs} modules in dist/bundle/${API_FILE}; ${warmed}\n`);

/** The published entry's text (see the top of this file). */
function engineEntry(api, names) {
  return `// Written by scripts/bundle-engine.mjs. The engine is ./${API_FILE}, one function expression compiled
// here with the V8 code cache the build wrote beside it: Node 20 keeps no compile cache for ES modules,
// and compiling the engine as one was most of its import. The static import below runs first, so the
// sandbox's first worker is booting while the engine compiles.
import * as workerStart from "${WORKER_START}";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";

const API = ${JSON.stringify(api)};
const file = fileURLToPath(new URL(API.file, import.meta.url));

/** In a function, so the cache's bytes are garbage once compiled, not kept for the life of the process. */
function compile() {
  // ASCII by construction (the build checks), so read without UTF-8 decoding.
  const source = readFileSync(file, "latin1");
  const cacheFile = fileURLToPath(new URL(API.cache, import.meta.url));
  let cachedData;
  // V8 checks a cache against the source's length, its own version and its flags, not the text; the
  // cache's name holds the hash of the text it was made from. CODECELL_CODE_CACHE=0 turns it off.
  if (source.length === API.length && process.env.CODECELL_CODE_CACHE !== "0") {
    try {
      cachedData = readFileSync(cacheFile);
    } catch {
      // No cache: the source is compiled, as without one.
    }
  }
  const script = new Script(source, { filename: file, ...(cachedData ? { cachedData } : {}) });
  // The build's warm-up (scripts/warm-code-cache.mjs) writes the cache from this script once cells ran.
  globalThis[Symbol.for("codecell.engineCodeCache")]?.(script, cacheFile);
  return script.runInThisContext();
}

const require = createRequire(import.meta.url);
const module = { exports: {} };
compile()(
  module.exports,
  (id) => (id === "${WORKER_START}" ? workerStart : require(id)),
  module,
  file,
  dirname(file),
  import.meta.url,
  (specifier) => import(specifier),
);
export const { ${names.join(", ")} } = module.exports;
`;
}
