// Run by `build` after tsc and scripts/build-prelude-bytecode.mjs (for the worker's cold start): bundles the
// worker thread's script and everything it loads as it boots (@codecell/bridge, @codecell/contract/errors,
// @codecell/transpile/plain-cell, quickjs-wasi, the guest prelude) into one CommonJS file,
// dist/worker/sandbox-worker.bundle.cjs, which src/worker-start.ts starts. A worker thread is a fresh
// isolate: an ES module entry costs it Node's ES module loader (about 10 ms of the thread's CPU here,
// measured with a trivial worker) and then resolving, reading and linking each module anew, all before
// the first cell. A CommonJS file is read and run by Node's CommonJS loader, which the worker boots with.
//
// The guest prelude is inlined as the exact text the shipped bytecode was compiled from: its source is
// its function's text (`GUEST_PRELUDE_SOURCE`, dist/worker/guest-prelude.js), which a bundler would
// reprint, so the bundle gets that text as a string literal instead (written with JSON.stringify, so
// it is the same string), and the build refuses to finish unless the bundle's string is exactly the one
// the manifest holds. A worker whose text differs still works (it compiles the prelude itself); it is
// only slower, and test/prelude-bytecode.test.ts checks that the built bundle takes the shipped bytes.
//
// Left as their own files, loaded on first use with `import()` (which Node's CommonJS loader supports):
// ./snapshot-codec.js (zlib and crypto) and @codecell/transpile (acorn, sucrase).

import { readFileSync } from "node:fs";
import { build } from "esbuild";

const packageDir = new URL("..", import.meta.url);
const workerDir = new URL("dist/worker/", packageDir);
const ENTRY = "dist/worker/sandbox-worker.js";
const BUNDLE = "dist/worker/sandbox-worker.bundle.cjs";
const { GUEST_PRELUDE_SOURCE } = await import(new URL("guest-prelude.js", workerDir).href);
const manifest = JSON.parse(readFileSync(new URL("guest-prelude.bytecode.json", workerDir), "utf8"));
if (manifest.source !== GUEST_PRELUDE_SOURCE) {
  throw new Error("dist/worker/guest-prelude.bytecode.json was not built from this prelude; rebuild");
}

/** Loaded on first use, from the files beside the bundle (or the package that owns them). */
const LOADED_ON_FIRST_USE = new Set(["./snapshot-codec.js", "@codecell/transpile"]);

const workerModules = {
  name: "worker-modules",
  setup(build) {
    // The prelude module as its exports only: the source text as a literal, and the same compile call.
    build.onResolve({ filter: /^\.\/guest-prelude\.js$/ }, () => ({
      path: "guest-prelude",
      namespace: "prelude",
    }));
    build.onLoad({ filter: /.*/, namespace: "prelude" }, () => ({
      contents: [
        'import { CompileFlags } from "quickjs-wasi";',
        `export const GUEST_PRELUDE_SOURCE = ${JSON.stringify(GUEST_PRELUDE_SOURCE)};`,
        "export function compileGuestPrelude(vm) {",
        '  return vm.compile(GUEST_PRELUDE_SOURCE, "prelude.js", 0, CompileFlags.STRIP_SOURCE);',
        "}",
      ].join("\n"),
      resolveDir: workerDir.pathname,
      loader: "js",
    }));
    build.onResolve({ filter: /.*/ }, (args) =>
      LOADED_ON_FIRST_USE.has(args.path) || args.path.startsWith("node:")
        ? { path: args.path, external: true }
        : undefined,
    );
  },
};

// guest-prelude.js's own compile call must still be the one inlined above.
const preludeModule = readFileSync(new URL("guest-prelude.js", workerDir), "utf8");
if (!preludeModule.includes('vm.compile(GUEST_PRELUDE_SOURCE, "prelude.js", 0, CompileFlags.STRIP_SOURCE)')) {
  throw new Error("compileGuestPrelude changed: update scripts/bundle-worker.mjs to compile the same way");
}

const result = await build({
  absWorkingDir: packageDir.pathname,
  entryPoints: [ENTRY],
  outfile: BUNDLE,
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  // Whitespace and syntax only: names stay readable in stack traces; less for the worker to read and parse.
  minifyWhitespace: true,
  minifySyntax: true,
  // Stack traces of a worker failure point through the map to dist's files, and from there to src.
  sourcemap: true,
  sourcesContent: false,
  legalComments: "none",
  charset: "ascii",
  logLevel: "warning",
  metafile: true,
  plugins: [workerModules],
});

// Every import() left must be one of those loaded on first use; everything else is in the bundle.
const output = result.metafile.outputs[BUNDLE];
for (const imported of output.imports) {
  const firstUse = imported.kind === "dynamic-import" && LOADED_ON_FIRST_USE.has(imported.path);
  const builtin = imported.kind === "require-call" && imported.path.startsWith("node:");
  if (!firstUse && !builtin) throw new Error(`the worker bundle ${imported.kind}s ${imported.path}`);
}
// The prelude's text in the bundle is exactly the manifest's (evaluated, not compared as written).
const bundled = readFileSync(new URL(BUNDLE, packageDir), "latin1");
// esbuild picks the quote; the literal is read up to its first unescaped closing quote and evaluated.
const literal = /\bGUEST_PRELUDE_SOURCE\s*=\s*(("|'|`)(?:[^\\]|\\.)*?\2)/s.exec(bundled)?.[1];
if (literal === undefined || new Function(`return ${literal};`)() !== manifest.source) {
  throw new Error(`${BUNDLE} does not hold the exact prelude source the shipped bytecode was built from`);
}
process.stdout.write(
  `${BUNDLE}: ${Object.keys(result.metafile.inputs).length} modules in one CommonJS file\n`,
);
