// Run by `build` after tsc (cold start): the package's published entry, dist/bundle/, is the
// engine with the `@codecell/*` packages it uses inlined. Node's ES module loader resolves, reads,
// compiles and links each file on its own; importing the engine from dist/index.js meant some 80 of
// them (about 410 KB), most of the main thread's time to a first result. The bundle is two files:
//
// - dist/bundle/index.js: the entry, written here from the names src/index.ts exports. It imports
//   @codecell/sandbox/worker-start first and alone (the sandbox's first worker and its wasm start as
//   that loads) and the engine with a dynamic import and a top-level await, so the worker boots on the
//   other core while the engine loads. An ES module is evaluated only once every module of its static
//   graph has been loaded, so a static import of the engine would start the worker only after all of it.
// - dist/bundle/engine-api.js: src/index.ts as built, the packages below the engine included.
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
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build, transform } from "esbuild";
import {
  checkWorkerStartExports,
  dependencyChains,
  inlinedImportMeta,
  sandboxStateFromWorkerStart,
  WORKER_START,
  workspacePackages,
} from "../../../scripts/workspace-bundle.mjs";

const packageDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", packageDir), "utf8"));
/** Imported only dynamically, on the paths that need it. */
const LAZY_PACKAGES = ["@codecell/transpile", "@codecell/typecheck"];

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

const ENTRY = "codecell-engine-entry";
const apiNames = await exportsOf("dist/index.js");
if (apiNames.length === 0) throw new Error("dist/index.js exports nothing; build it with tsc first");

/** The published entry: the sandbox's early start, then every value of the API from the second file. */
const entry = {
  name: "engine-entry",
  setup(build) {
    build.onResolve({ filter: new RegExp(`^${ENTRY}$`) }, () => ({ path: ENTRY, namespace: ENTRY }));
    build.onLoad({ filter: /.*/, namespace: ENTRY }, () => ({
      contents: [
        `import "${WORKER_START}";`,
        'const engine = await import("./index.js");',
        `export const { ${apiNames.join(", ")} } = engine;`,
      ].join("\n"),
      loader: "js",
      resolveDir: fileURLToPath(new URL("dist", packageDir)),
    }));
  },
};

const result = await build({
  absWorkingDir: fileURLToPath(packageDir),
  entryPoints: [
    { in: ENTRY, out: "index" },
    { in: "dist/index.js", out: "engine-api" },
  ],
  outdir: "dist/bundle",
  bundle: true,
  // The entry's dynamic import of dist/index.js is the second file's name.
  splitting: true,
  chunkNames: "[name]",
  platform: "node",
  format: "esm",
  target: "node20",
  // Names and layout stay as written: readable stack traces for a library; comments go.
  legalComments: "none",
  sourcemap: true,
  sourcesContent: false,
  metafile: true,
  plugins: [
    entry,
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

const outputs = Object.entries(result.metafile.outputs).filter(([file]) => !file.endsWith(".map"));
const expected = ["dist/bundle/engine-api.js", "dist/bundle/index.js"];
const written = outputs.map(([file]) => file).sort();
if (JSON.stringify(written) !== JSON.stringify(expected)) {
  throw new Error(`the engine bundle is ${written.join(", ")}, expected ${expected.join(", ")}`);
}
for (const [file, output] of outputs) {
  for (const imported of output.imports) {
    if (LAZY_PACKAGES.includes(imported.path) && imported.kind !== "dynamic-import") {
      throw new Error(`${file} imports ${imported.path} as ${imported.kind}; it must stay a lazy import()`);
    }
  }
}
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`engine bundle: ${inputs} modules in ${outputs.length} files\n`);
