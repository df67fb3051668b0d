// Builds the `codecell` command (the time from process start to the first tools/list):
//
// - dist/cli-main.js: src/cli/cli.ts with the `@codecell/*` packages it uses and its third-party
//   dependencies (the MCP SDK with zod, json5) in one ES module, so a start reads one file instead of
//   resolving, reading and compiling some 75 ES modules of ours and 280 of theirs. It is the code the
//   tests import, bundled; what only a lazy path needs (the HTTP transport, node:http, the TypeScript
//   transpiler) stays behind an `import()` that the bundle evaluates when that path runs.
// - dist/cli-chunk-<hash>.js: what only a lazy path imports, loaded when that path runs.
// - dist/cli-ajv.cjs, dist/cli-acorn.cjs: libraries only a rare path needs (see LIBRARIES_BESIDE).
// - dist/cli.js: src/cli/cli-entry.ts, which the bin and the tests run. It starts the sandbox's early
//   worker and sets the V8 flags before it imports dist/cli-main.js: an ES module's static imports are
//   evaluated before its own code, so the bundle's import of the worker start could not wait for them.
//
// One package stays outside the bundle, loaded by name as the ES module it is, so the process holds
// exactly one copy of it: @codecell/sandbox/worker-start (it starts the sandbox's first worker as it loads,
// before anything else, and holds the sandbox's process-wide state). The packages that plugins (loaded at
// run time) import by name, @codecell/contract and @codecell/namespaces, are inlined too: what must be
// shared with a plugin's copy is kept under registry symbols (CodeModeError's brand, the namespace
// registry and tool markers). How the packages are found and inlined is shared with the engine's bundle:
// the repository's scripts/workspace-bundle.mjs. Files the packages read at run time (the sandbox's
// worker script, quickjs.wasm, the prelude bytecode) stay where they are in each package.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
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
import { lazySdkSchemas } from "./lazy-sdk-schemas.mjs";

const appDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", appDir), "utf8"));
const external = [WORKER_START];

const packages = workspacePackages();

/**
 * The engine by its modules (dist/index.js, as tsc built it), not by its published bundle: that one
 * would bring second copies of the packages the CLI inlines as well, and its entry's top-level await
 * orders the sandbox's early start, which the start-up file does here.
 */
const engineModules = {
  name: "engine-modules",
  setup(build) {
    build.onResolve({ filter: /^@codecell\/engine$/ }, () => ({
      path: join(packages.byName.get("@codecell/engine").dir, "dist", "index.js"),
    }));
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
 * own, built with the first approval; src/mcp/mcp-front.ts) and which a client builds only when it is made.
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
 * Libraries that only a rare path needs, bundled in files of their own beside the bundle instead of in
 * it: every start reads the whole bundle, and reading costs about 10 µs of CPU per KB on a machine where
 * touching fresh memory is slow. Each is required by its one importer when that module is first
 * evaluated; the build refuses any other importer of the library, so the process holds one copy.
 * - Ajv and ajv-formats (about 190 KB): the SDK's Ajv provider, evaluated with the first approval
 *   (lazyAjv above, and src/mcp/mcp-front.ts).
 * - acorn (about 150 KB): @codecell/transpile's parser, evaluated with the first cell that is not plain
 *   JavaScript (TypeScript, or a syntax error to explain) and with a module-access check.
 */
const LIBRARIES_BESIDE = [
  {
    file: "cli-ajv.cjs",
    importer: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]validation[\\/]ajv-provider\.js$/,
    imports: "import Ajv from 'ajv';\nimport _addFormats from 'ajv-formats';\n",
    binding: "{ Ajv, addFormats: _addFormats }",
    packages: /^ajv(-formats)?(\/.*)?$/,
    exports: 'export { default as Ajv } from "ajv";\nexport { default as addFormats } from "ajv-formats";\n',
    resolveDir: () => dirname(fileURLToPath(import.meta.resolve("@modelcontextprotocol/sdk/validation/ajv"))),
  },
  {
    file: "cli-acorn.cjs",
    importer: /[\\/]packages[\\/]transpile[\\/]dist[\\/]javascript-parser\.js$/,
    imports: 'import { parse } from "acorn";\n',
    binding: "{ parse }",
    packages: /^acorn(\/.*)?$/,
    exports: 'export { parse } from "acorn";\n',
    resolveDir: () => join(packages.byName.get("@codecell/transpile").dir, "dist"),
  },
];

const librariesBeside = {
  name: "libraries-beside",
  setup(build) {
    for (const library of LIBRARIES_BESIDE) {
      build.onLoad({ filter: library.importer }, (args) => {
        const source = readFileSync(args.path, "utf8");
        if (source.split(library.imports).length !== 2) {
          throw new Error(`${args.path} no longer imports as scripts/bundle-cli.mjs expects`);
        }
        return {
          contents: source.replace(
            library.imports,
            `const ${library.binding} = require("./${library.file}");\n`,
          ),
          loader: "js",
          resolveDir: dirname(args.path),
        };
      });
      build.onResolve({ filter: new RegExp(`^\\./${library.file.replace(".", "\\.")}$`) }, (args) => ({
        path: args.path,
        external: true,
      }));
      build.onResolve({ filter: library.packages }, (args) => {
        throw new Error(`${args.importer} imports ${args.path}; only dist/${library.file} may hold it`);
      });
    }
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
 * zod's object schemas generate their fast parser (a `new Function`) on their ZOD_FAST_PARSER_AT-th
 * synchronous parse instead of their first. zod compiles one per object schema the first time it parses
 * with it, which costs a compile per schema. At start-up almost every schema parses once (each
 * config field), and the protocol's message schemas a few times each: every incoming message is parsed
 * by several of them. Compiled at the second parse, nine were still compiled
 * before the first exec result, six of them before `tools/list`; from the tenth, none (the protocol's
 * busiest schema is at its eighth parse by then; the main thread's instructions
 * through `tools/list` 764-768 → 755 M under callgrind). Until
 * then a parse takes zod's own general path, the one its `jitless` setting selects (same result, same
 * issues); every later parse is as fast as before.
 */
const ZOD_FAST_PARSER_AT = 10;
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
          CONDITION.replace(
            ") {",
            ` && (fastpass !== undefined || ++syncParses >= ${ZOD_FAST_PARSER_AT})) {`,
          ) +
          source.slice(at + CONDITION.length),
        loader: "js",
      };
    });
  },
};

await checkWorkerStartExports(packages, build);

// The libraries beside the bundle, each resolved as its one importer resolves it (see LIBRARIES_BESIDE).
for (const library of LIBRARIES_BESIDE) {
  await build({
    absWorkingDir: new URL(".", appDir).pathname,
    stdin: {
      contents: library.exports,
      resolveDir: library.resolveDir(),
      sourcefile: library.file,
      loader: "js",
    },
    outfile: `dist/${library.file}`,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: "none",
    charset: "ascii",
    logLevel: "warning",
  });
}

// A build's chunks only: an earlier build's, under other hashes, go.
for (const file of readdirSync(new URL("dist/", appDir))) {
  if (/^cli-(chunk-.*|main)\.js(\.map)?$/.test(file)) rmSync(new URL(`dist/${file}`, appDir));
}

const bundled = await build({
  absWorkingDir: new URL(".", appDir).pathname,
  entryPoints: { "cli-main": "src/cli/cli.ts" },
  outdir: "dist",
  // What a lazy path imports (the HTTP transport and node:http with it, the TypeScript transpiler) goes
  // in chunks of its own beside the bundle: an ES module's imports are all loaded before it runs, so
  // in one file they would load at every start.
  splitting: true,
  chunkNames: "cli-chunk-[hash]",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external,
  // The CommonJS libraries inside (and those beside, LIBRARIES_BESIDE) `require` what they load.
  banner: {
    js: 'import { createRequire as __codecellCreateRequire } from "node:module";\nconst require = __codecellCreateRequire(import.meta.url);',
  },
  // Whitespace and syntax only: names stay readable in stack traces. Less to read and compile.
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "none",
  sourcemap: true,
  metafile: true,
  plugins: [
    engineModules,
    sandboxStateFromWorkerStart(packages),
    inlinedImportMeta({
      packages,
      chains: dependencyChains(packages, Object.keys(manifest.dependencies)),
      transform,
      bundleName: "the gateway",
    }),
    lazySchemas,
    lazyAjv,
    librariesBeside,
    englishZod,
    zodFastParserOnReuse,
  ],
  logLevel: "warning",
});

// The worker start is the one package left to Node (cli-entry.ts imported it before this bundle loads).
for (const [file, output] of Object.entries(bundled.metafile.outputs)) {
  for (const imported of output.imports) {
    if (imported.external && imported.path.startsWith("@codecell/") && imported.path !== WORKER_START) {
      throw new Error(`${file} leaves ${imported.path} outside; only ${WORKER_START} may be`);
    }
  }
}

/** The entry's import of the command (src/cli/cli.ts) is the bundle beside it. */
const commandBeside = {
  name: "command-beside",
  setup(build) {
    build.onResolve({ filter: /^\.\/cli\.js$/ }, () => ({ path: "./cli-main.js", external: true }));
  },
};

await build({
  absWorkingDir: new URL(".", appDir).pathname,
  entryPoints: ["src/cli/cli-entry.ts"],
  outfile: "dist/cli.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external,
  plugins: [commandBeside],
  logLevel: "warning",
});
