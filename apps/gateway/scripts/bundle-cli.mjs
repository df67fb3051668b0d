// Builds the `codecell` command (issue 18: the time from process start to the first tools/list):
//
// - dist/cli-bundle.cjs: src/cli.ts with the `@codecell/*` packages it uses and its third-party
//   dependencies (the MCP SDK with zod and ajv, json5) in one file, so a cold start reads one file with
//   V8's code cache instead of resolving, reading and compiling some 75 ES modules of ours and 280 of
//   theirs. It is one function expression (CommonJS inside), compiled by the start-up file through
//   `vm.Script`, which can keep V8's code cache on disk; Node 20 has no compile cache for modules. In
//   CommonJS form, what only a lazy path needs (the HTTP transport, node:http, the TypeScript
//   transpiler) stays unevaluated until that path runs.
// - dist/cli.js: the start-up file (src/cli-entry.ts), which the bin and the tests run. It starts the
//   sandbox's early worker, loads the packages the bundle leaves external, and runs the bundle with the
//   code cache. The bundle's hash, length and external packages are written into it here.
//
// One package stays outside the bundle, loaded by name as the ES module it is, so the process holds
// exactly one copy of it: @codecell/sandbox/worker-start. It starts the sandbox's first worker as it
// loads (before anything else), and it and wasm-module.js hold the sandbox's process-wide state (the
// early worker, the compiled wasm and its checked prelude bytecode); the rest of the sandbox is inlined
// and takes those modules' exports from this entry. The packages that plugins (loaded at run time)
// import by name, @codecell/contract and @codecell/namespaces, are inlined too: what must be shared with
// a plugin's copy is kept under registry symbols (CodeModeError's brand, the namespace tool markers).
// Inlined modules that read `import.meta.url` (to load a library on demand from their own package) get
// their module's real location (scripts/package-import-meta.mjs). Files the packages read at run time
// (the sandbox's worker script, quickjs.wasm, the prelude bytecode) stay where they are in each package.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build, transform } from "esbuild";
import { lazySdkSchemas } from "./lazy-sdk-schemas.mjs";

const appDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", appDir), "utf8"));
/** Loaded by name outside the bundle (see above). */
const WORKER_START = "@codecell/sandbox/worker-start";
const external = [WORKER_START];
/** The sandbox modules whose exports the bundle takes from WORKER_START (it re-exports them). */
const SANDBOX_STATE_MODULES = ["worker-start.js", "wasm-module.js"];
const BUNDLE_FILE = "cli-bundle.cjs";
/** The bundle's parameters; src/cli-entry.ts calls it with these, in this order. */
const BUNDLE_PARAMETERS = [
  "exports",
  "require",
  "module",
  "__filename",
  "__dirname",
  "__codecellEntryUrl",
  "__codecellHost",
];

/** The workspace's packages (not this app) by folder: name, main file, workspace dependencies. */
function workspacePackages() {
  const packagesDir = realpathSync(new URL("../../packages", appDir));
  const found = new Map();
  for (const folder of readdirSync(packagesDir)) {
    const dir = join(packagesDir, folder);
    let pkg;
    try {
      pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    } catch {
      continue;
    }
    const main = pkg.exports?.["."]?.default;
    if (typeof main !== "string") continue;
    found.set(dir, {
      name: pkg.name,
      main: join(dir, main),
      dependencies: Object.keys(pkg.dependencies ?? {}).filter((name) => name.startsWith("@codecell/")),
    });
  }
  return found;
}
const packagesByDir = workspacePackages();
const packagesByName = new Map([...packagesByDir.values()].map((pkg) => [pkg.name, pkg]));

/** How Node reaches each workspace package from the gateway: the shortest chain of dependencies. */
function dependencyChains() {
  const chains = new Map();
  let frontier = Object.keys(manifest.dependencies)
    .filter((name) => packagesByName.has(name))
    .map((name) => [name]);
  while (frontier.length > 0) {
    const next = [];
    for (const chain of frontier) {
      const name = chain.at(-1);
      if (chains.has(name)) continue;
      chains.set(name, chain);
      for (const dependency of packagesByName.get(name).dependencies) next.push([...chain, dependency]);
    }
    frontier = next;
  }
  return chains;
}
const chains = dependencyChains();

/** The workspace package a file belongs to, or undefined (this app's own files, node_modules). */
function packageOf(file) {
  for (const [dir, pkg] of packagesByDir) if (file.startsWith(`${dir}${sep}`)) return pkg;
  return undefined;
}

const IMPORT_META_HELPER = fileURLToPath(new URL("package-import-meta.mjs", import.meta.url));

/**
 * Inlines the workspace packages: the engine by its module without the top-level await (the start-up
 * file has already started the sandbox's worker, which is what that await orders), the sandbox's state
 * modules from WORKER_START, and each module's `import.meta` as its place in its installed package.
 */
const workspaceModules = {
  name: "workspace-modules",
  setup(build) {
    build.onResolve({ filter: /^@codecell\/engine$/ }, () => {
      const engine = packagesByName.get("@codecell/engine");
      return { path: join(dirname(engine.main), "engine-api.js") };
    });
    build.onResolve({ filter: /^\.\/[\w-]+\.js$/ }, (args) => {
      const pkg = packageOf(args.importer);
      if (pkg?.name !== "@codecell/sandbox") return undefined;
      const file = args.path.slice(2);
      if (SANDBOX_STATE_MODULES.includes(file)) return { path: WORKER_START, external: true };
      if (file === "prelude-bytecode.js") {
        throw new Error(`${args.importer} imports ${args.path}, which only ${WORKER_START} may load`);
      }
      return undefined;
    });
    build.onLoad({ filter: /\.js$/ }, async (args) => {
      const pkg = packageOf(args.path);
      if (pkg === undefined) return undefined;
      const source = readFileSync(args.path, "utf8");
      if (!source.includes("import.meta")) return undefined;
      const chain = chains.get(pkg.name);
      if (chain === undefined)
        throw new Error(`${pkg.name} is bundled but the gateway does not depend on it`);
      const fromMain = `./${relative(dirname(pkg.main), args.path).split(sep).join("/")}`;
      const { code } = await transform(source, {
        define: { "import.meta": "__codecellImportMeta" },
        loader: "js",
        format: "esm",
        sourcefile: args.path,
      });
      return {
        contents:
          `import { packageImportMeta } from ${JSON.stringify(IMPORT_META_HELPER)};\n` +
          `const __codecellImportMeta = packageImportMeta(${JSON.stringify(chain)}, ${JSON.stringify(fromMain)});\n` +
          code,
        loader: "js",
        resolveDir: dirname(args.path),
      };
    });
  },
};

/** The MCP SDK's protocol schemas, each built on first use (see scripts/lazy-sdk-schemas.mjs). */
const lazySchemas = {
  name: "lazy-sdk-schemas",
  setup(build) {
    build.onLoad({ filter: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]types\.js$/ }, (args) => {
      const { contents, count } = lazySdkSchemas(readFileSync(args.path, "utf8"));
      // The SDK defined some 150 when this was written; far fewer means the module changed shape.
      if (count < 100)
        throw new Error(`only ${count} lazy schemas in ${args.path}; see scripts/lazy-sdk-schemas.mjs`);
      return { contents, loader: "js" };
    });
  },
};

/**
 * Ajv (and its formats) evaluated only when a JSON Schema validator is built: the SDK's server and client
 * modules import it to build one by default, which the gateway never does for a server (it passes its
 * own, built with the first approval; src/mcp-front.ts) and which a client builds only when it is made.
 * Here that default is a lazy `require` of the same module, so Ajv's 40-odd modules wait until then.
 */
const lazyAjv = {
  name: "lazy-ajv",
  setup(build) {
    const IMPORT = "import { AjvJsonSchemaValidator } from '../validation/ajv-provider.js';\n";
    const USE = "new AjvJsonSchemaValidator()";
    build.onLoad(
      { filter: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/](server|client)[\\/]index\.js$/ },
      (args) => {
        const source = readFileSync(args.path, "utf8");
        if (source.split(IMPORT).length !== 2 || source.split(USE).length !== 2) {
          throw new Error(`${args.path} no longer imports Ajv as scripts/bundle-cli.mjs expects`);
        }
        return {
          contents: source
            .replace(IMPORT, "")
            .replace(USE, 'new (require("../validation/ajv-provider.js").AjvJsonSchemaValidator)()'),
          loader: "js",
        };
      },
    );
  },
};

/**
 * zod's messages in English only: zod re-exports all of its ~50 locales (about 300 KB, a fifth of the
 * bundle, read from disk at every start) as `z.locales`, and sets English as the default. Nothing in the
 * CLI, its packages or the MCP SDK selects another locale.
 */
const englishZod = {
  name: "english-zod",
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      contents: 'export { default as en } from "./en.js";\n',
      loader: "js",
    }));
  },
};

/**
 * zod's object schemas generate their fast parser (a `new Function`) on their second synchronous parse
 * instead of their first. zod compiles one per object schema the first time it parses with it; at
 * start-up almost every schema parses once (each config field, the initialize and tools/list requests),
 * so that was some 10 ms of compiling code that never ran again, which V8's code cache cannot keep. A
 * first parse takes zod's own general path, the one its `jitless` setting selects (same result, same
 * issues); every later parse is as fast as before.
 */
const zodFastParserOnReuse = {
  name: "zod-fast-parser-on-reuse",
  setup(build) {
    const CONDITION = "if (jit && fastEnabled && ctx?.async === false && ctx.jitless !== true) {";
    const ASSIGN = "inst._zod.parse = (payload, ctx) => {";
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]core[\\/]schemas\.js$/ }, (args) => {
      const source = readFileSync(args.path, "utf8");
      const at = source.indexOf(CONDITION);
      const assignAt = source.lastIndexOf(ASSIGN, at);
      if (at < 0 || source.indexOf(CONDITION, at + 1) >= 0 || assignAt < 0) {
        throw new Error(`${args.path} no longer builds object parsers as scripts/bundle-cli.mjs expects`);
      }
      return {
        contents:
          source.slice(0, assignAt) +
          `let syncParses = 0;\n    ${source.slice(assignAt, at)}` +
          CONDITION.replace(") {", " && (fastpass !== undefined || ++syncParses > 1)) {") +
          source.slice(at + CONDITION.length),
        loader: "js",
      };
    });
  },
};

/** In the bundle, src/cli-host.ts is what the start-up file hands over (see that file). */
const hostFromEntry = {
  name: "host-from-entry",
  setup(build) {
    build.onLoad({ filter: /[\\/]src[\\/]cli-host\.ts$/ }, () => ({
      contents:
        "export const importModule = __codecellHost.importModule;\n" +
        "export const saveCodeCache = __codecellHost.saveCodeCache;\n",
      loader: "js",
    }));
  },
};

/** Every name the bundle takes from WORKER_START must be one it exports. */
async function checkWorkerStartExports() {
  const sandboxDir = dirname(packagesByName.get("@codecell/sandbox").main);
  const exportsOf = async (file) => {
    const result = await build({
      entryPoints: [join(sandboxDir, file)],
      bundle: false,
      write: false,
      metafile: true,
      format: "esm",
      outdir: "out",
      logLevel: "silent",
    });
    return Object.values(result.metafile.outputs).find((output) => output.entryPoint)?.exports ?? [];
  };
  const offered = new Set(await exportsOf("worker-start.js"));
  for (const file of SANDBOX_STATE_MODULES) {
    const missing = (await exportsOf(file)).filter((name) => !offered.has(name));
    if (missing.length > 0)
      throw new Error(`${WORKER_START} does not re-export ${missing.join(", ")} of ${file}`);
  }
}
await checkWorkerStartExports();

const bundled = await build({
  absWorkingDir: new URL(".", appDir).pathname,
  entryPoints: ["src/cli.ts"],
  outfile: `dist/${BUNDLE_FILE}`,
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  external,
  define: { "import.meta.url": "__codecellEntryUrl" },
  // Its code was ES modules (strict) before it was bundled; it stays strict inside the function.
  banner: { js: `(function (${BUNDLE_PARAMETERS.join(", ")}) {"use strict";` },
  footer: { js: "})" },
  // Whitespace and syntax only: names stay readable in stack traces. Less to read, hash and compile.
  minifyWhitespace: true,
  minifySyntax: true,
  // Comments are the only place non-ASCII could stay (esbuild escapes it in code), and they go.
  legalComments: "none",
  charset: "ascii",
  sourcemap: true,
  metafile: true,
  plugins: [workspaceModules, lazySchemas, lazyAjv, englishZod, zodFastParserOnReuse, hostFromEntry],
  logLevel: "warning",
});

const bundleUrl = new URL(`dist/${BUNDLE_FILE}`, appDir);
const bundleBytes = readFileSync(bundleUrl);
if (bundleBytes.some((byte) => byte > 0x7f)) {
  throw new Error(`dist/${BUNDLE_FILE} is not ASCII; the start-up file reads it as latin1`);
}
// Every external package must be a plain `require` at load, which the start-up file answers with the
// package it imported beforehand; a lazy `import()` of one would have no loader inside the script.
const output = Object.values(bundled.metafile.outputs).find((entry) => entry.entryPoint === "src/cli.ts");
const required = new Set();
for (const imported of output.imports) {
  if (!imported.external || !imported.path.startsWith("@codecell/")) continue;
  if (imported.kind !== "require-call") {
    throw new Error(
      `the bundle imports ${imported.path} as ${imported.kind}; only require-call is supported`,
    );
  }
  required.add(imported.path);
}

await build({
  absWorkingDir: new URL(".", appDir).pathname,
  entryPoints: ["src/cli-entry.ts"],
  outfile: "dist/cli.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external,
  define: {
    CLI_BUNDLE: JSON.stringify({
      file: `./${BUNDLE_FILE}`,
      sha256: createHash("sha256").update(bundleBytes).digest("hex"),
      length: bundleBytes.length,
      externals: [...required].sort(),
    }),
  },
  sourcemap: true,
  logLevel: "warning",
});
