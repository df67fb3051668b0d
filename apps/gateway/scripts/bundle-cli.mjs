// Builds the `codecell` command (issue 18: the time from process start to the first tools/list):
//
// - dist/cli-bundle.cjs: src/cli.ts and its third-party dependencies (the MCP SDK with zod and ajv,
//   json5) in one file, so a cold start resolves and reads one module instead of some 280. It is one
//   function expression (CommonJS inside), compiled by the start-up file through `vm.Script`, which can
//   keep V8's code cache on disk; Node 20 has no compile cache for modules. In CommonJS form, what only
//   a lazy path needs (the HTTP transport, node:http) stays unevaluated until that path runs.
// - dist/cli.js: the start-up file (src/cli-entry.ts), which the bin and the tests run. It starts the
//   sandbox's early worker, loads the packages the bundle leaves external, and runs the bundle with the
//   code cache. The bundle's hash, length and external packages are written into it here.
//
// The codecell packages stay external, imported by name as before: they find files beside themselves
// (the sandbox's worker script and wasm, the lazy `require` of zod, MiniSearch, better-sqlite3, ioredis
// and the TypeScript transformer), and some keep one registry per process (plugin namespaces), so there
// must be exactly one copy of each. The MCP connector is the exception: it shares the MCP SDK with the
// gateway, which must not load twice, and holds nothing that needs its own location.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { build } from "esbuild";

const appDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", appDir), "utf8"));
const BUNDLED_WORKSPACE_PACKAGES = new Set(["@codecell/mcp-connector"]);
const externalPackages = Object.keys(manifest.dependencies).filter(
  (name) => name.startsWith("@codecell/") && !BUNDLED_WORKSPACE_PACKAGES.has(name),
);
const external = externalPackages.flatMap((name) => [name, `${name}/*`]);
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
  plugins: [hostFromEntry],
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
