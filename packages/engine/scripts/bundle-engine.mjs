// Run by `build` after tsc: the package's published entry is dist/bundle/index.js, and the engine with
// the `@codecell/*` packages it uses inlined is one ES module beside it, dist/bundle/engine.js. Node's ES
// module loader resolves, reads, compiles and links each file on its own; importing the engine from
// dist/index.js meant some 80 of them. The entry imports @codecell/sandbox/worker-start, then the engine
// with a top-level `await import()`: a static import would have Node read and compile the whole engine
// before any module ran, and the sandbox's first worker and its wasm start booting on the other core
// while the engine loads instead.
//
// Left outside, loaded by name as the ES modules they are:
// - @codecell/sandbox/worker-start, for the process's one copy of the sandbox's state (the rules of
//   the repository's scripts/workspace-bundle.mjs, which the gateway's CLI bundle follows as well);
// - @codecell/transpile and @codecell/typecheck: the engine imports them only on the paths that need
//   them (a TypeScript-only cell, a failure hint, a type check), so they stay lazy loads; the build fails
//   if anything imports them statically.
// Third-party libraries are loaded on demand through `createRequire` (zod, MiniSearch, better-sqlite3,
// ioredis), never imported statically on this path; the build fails if one is.
//
// Hosts that import other `@codecell/*` packages beside the engine (namespaces to register plugins'
// namespaces, contract for CodeModeError) get second copies of them; what must be shared between copies
// is kept process-wide under registry symbols (the namespace registry and tool markers, CodeModeError's
// brand and its `instanceof`). test/bundle.e2e.test.ts runs such a host against this bundle.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
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
const ENGINE_FILE = "dist/bundle/engine.js";

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

// A build's files only: an earlier layout's go.
rmSync(new URL("dist/bundle/", packageDir), { recursive: true, force: true });

const result = await build({
  absWorkingDir: fileURLToPath(packageDir),
  entryPoints: ["dist/index.js"],
  outfile: ENGINE_FILE,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  // Names and layout stay as written: readable stack traces for a library.
  legalComments: "none",
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

const output = result.metafile.outputs[ENGINE_FILE];
for (const imported of output.imports) {
  if (imported.path.startsWith("node:")) continue;
  const allowed =
    (imported.path === WORKER_START && imported.kind === "import-statement") ||
    (LAZY_PACKAGES.includes(imported.path) && imported.kind === "dynamic-import");
  if (!allowed) {
    throw new Error(
      `${ENGINE_FILE} loads ${imported.path} as ${imported.kind}; only ${WORKER_START} (imported at load) and ${LAZY_PACKAGES.join(", ")} (import()) may stay outside`,
    );
  }
}
/** The values dist/index.js exports (its types have no JavaScript), as esbuild reads them. */
const names = Object.values(
  (
    await build({
      absWorkingDir: fileURLToPath(packageDir),
      entryPoints: ["dist/index.js"],
      bundle: false,
      write: false,
      metafile: true,
      format: "esm",
      outdir: "out",
      logLevel: "silent",
    })
  ).metafile.outputs,
).find((entry) => entry.entryPoint)?.exports;
if (!names?.length) throw new Error("dist/index.js exports nothing; build it with tsc first");
writeFileSync(
  new URL("dist/bundle/index.js", packageDir),
  `// Written by scripts/bundle-engine.mjs: the sandbox's early worker starts first, then the engine loads.
import "${WORKER_START}";
const engine = await import("./engine.js");
export const { ${names.join(", ")} } = engine;
`,
);
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`engine bundle: ${inputs} modules in ${ENGINE_FILE}\n`);
