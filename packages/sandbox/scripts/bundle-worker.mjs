// Run by `build` after tsc (issue 18, cold start): bundles the worker thread's script and the modules it
// loads as it boots (@codecell/bridge, @codecell/contract/errors, @codecell/transpile/plain-cell) into
// dist/worker/sandbox-worker.bundle.js, which src/worker-start.ts starts. A worker thread is a fresh
// isolate whose ES module loader resolves, reads and links every file anew, before the first cell and
// on the way to it; one file instead of fifteen is what that costs least.
//
// Left as their own files, imported from beside the bundle:
// - ./guest-prelude.js: its function's text is the prelude source the shipped bytecode was compiled from
//   (scripts/build-prelude-bytecode.mjs, checked by hash and by text); a bundler would reprint it.
// - quickjs-wasi: the prelude imports it too, and there must be one copy of it.
// - ./snapshot-codec.js and @codecell/transpile (acorn, sucrase): loaded on first use, not at boot.
import { build } from "esbuild";

const packageDir = new URL("..", import.meta.url);

/** Keep exactly these specifiers external; `@codecell/transpile/plain-cell` is bundled. */
const keepExternal = {
  name: "keep-external",
  setup(build) {
    const external = new Set([
      "./guest-prelude.js",
      "./snapshot-codec.js",
      "quickjs-wasi",
      "@codecell/transpile",
    ]);
    build.onResolve({ filter: /.*/ }, (args) =>
      external.has(args.path) || args.path.startsWith("node:")
        ? { path: args.path, external: true }
        : undefined,
    );
  },
};

const result = await build({
  absWorkingDir: packageDir.pathname,
  entryPoints: ["dist/worker/sandbox-worker.js"],
  outfile: "dist/worker/sandbox-worker.bundle.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  // Stack traces of a worker failure point through the map to dist's files, and from there to src.
  sourcemap: true,
  sourcesContent: false,
  legalComments: "none",
  logLevel: "warning",
  metafile: true,
  plugins: [keepExternal],
});
const inputs = Object.keys(result.metafile.inputs).length;
process.stdout.write(`sandbox worker bundle: ${inputs} modules in one file\n`);
