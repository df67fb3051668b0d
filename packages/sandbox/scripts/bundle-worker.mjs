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
//
// The in-thread bundle (dist/worker/in-thread.bundle.cjs) is one function expression instead, which
// src/in-thread-sandbox.ts compiles through `vm.Script` with V8's code cache: on the host's thread there
// is somewhere to keep one (beside the bundle), and compiling the bundle and then each function of a
// first cell was about a fifth of an embedded engine's way to its first result. The build writes
// - in-thread.bundle.json: the bundle's file, length and cache name (the cache's name holds the hash of
//   the text it was made from; V8 itself checks only the length);
// - in-thread-import.cjs: the `import()` the bundle's lazy loads go through (a script compiled by
//   node:vm has no module loader behind it, a CommonJS module of Node's loader does);
// - in-thread.bundle.<hash>.v8cache: the cache, from a process that ran cells with the bundle
//   (scripts/warm-code-cache.mjs), so the functions a first cell runs are in it. V8 takes it only in a
//   process of the same Node and V8 flags; elsewhere the source is compiled, as without a cache.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { routeDynamicImports, runWarmUp } from "../../../scripts/workspace-bundle.mjs";

const packageDir = new URL("..", import.meta.url);
const workerDir = new URL("dist/worker/", packageDir);
/**
 * The worker thread's entry, and the entry of the same modules on the host's own thread (the in-thread
 * sandbox, src/in-thread-sandbox.ts, which requires its bundle for the same reason: one file to read).
 */
const BUNDLES = [
  { entry: "dist/worker/sandbox-worker.js", bundle: "dist/worker/sandbox-worker.bundle.cjs" },
  { entry: "dist/worker/in-thread.js", bundle: "dist/worker/in-thread.bundle.cjs", script: true },
];
/** The in-thread bundle's parameters; src/in-thread-sandbox.ts calls it with these, in this order. */
const SCRIPT_PARAMETERS = ["exports", "require", "module", "__filename", "__dirname", "__codecellImport"];
/** acorn's tokenizer, from @codecell/transpile (a dependency): import() calls are found as tokens. */
const acorn = createRequire(createRequire(import.meta.url).resolve("@codecell/transpile"))("acorn");
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

for (const { entry, bundle: BUNDLE, script } of BUNDLES) {
  const result = await build({
    absWorkingDir: packageDir.pathname,
    entryPoints: [entry],
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
    // Its code was ES modules (strict) before it was bundled; it stays strict inside the function.
    ...(script
      ? { banner: { js: `(function (${SCRIPT_PARAMETERS.join(", ")}) {"use strict";` }, footer: { js: "})" } }
      : {}),
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
  const inputs = Object.keys(result.metafile.inputs).length;
  if (script) {
    const lazyImports = output.imports.filter((imported) => imported.kind === "dynamic-import").length;
    writeScript(BUNDLE, bundled, lazyImports);
    process.stdout.write(
      `${BUNDLE}: ${inputs} modules in one script; ${runWarmUp(fileURLToPath(new URL("warm-code-cache.mjs", import.meta.url)), fileURLToPath(packageDir))}\n`,
    );
  } else {
    process.stdout.write(`${BUNDLE}: ${inputs} modules in one CommonJS file\n`);
  }
}

/**
 * The in-thread bundle as the script src/in-thread-sandbox.ts runs: its import() calls become calls of
 * the `__codecellImport` it is given (routeDynamicImports), and
 * its manifest and import helper are written beside it; earlier builds' caches go.
 */
function writeScript(bundle, text, lazyImports) {
  const rewritten = routeDynamicImports(text, { acorn, name: "__codecellImport", minimum: lazyImports });
  const bundleUrl = new URL(bundle, packageDir);
  writeFileSync(bundleUrl, rewritten);
  const name = bundle.slice(bundle.lastIndexOf("/") + 1);
  const base = name.replace(/\.cjs$/, "");
  for (const file of readdirSync(workerDir)) {
    if (file.startsWith(`${base}.`) && file.endsWith(".v8cache")) rmSync(new URL(file, workerDir));
  }
  const sha = createHash("sha256").update(rewritten).digest("hex").slice(0, 16);
  const manifest = { file: `./${name}`, length: rewritten.length, cache: `./${base}.${sha}.v8cache` };
  writeFileSync(new URL(`${base}.json`, workerDir), `${JSON.stringify(manifest)}\n`);
  writeFileSync(
    new URL("in-thread-import.cjs", workerDir),
    [
      "// Written by scripts/bundle-worker.mjs: the import() of the in-thread bundle's lazy loads (see there).",
      "// Relative specifiers are the bundle's own files, beside this one.",
      '"use strict";',
      "module.exports = (specifier) =>",
      '  import(specifier.startsWith(".") ? require("node:url").pathToFileURL(require("node:path").join(__dirname, specifier)).href : specifier);',
      "",
    ].join("\n"),
  );
}
