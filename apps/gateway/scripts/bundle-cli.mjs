// Bundles the `codecell` command into one file, dist/cli.js (over the file tsc emitted), so that a cold
// `codecell serve` resolves and reads one module for the MCP SDK, zod, ajv and the rest instead of some
// 280 (issue 18: on Node 20, with no compile cache, resolving and compiling them was most of the time to
// the first tools/list; bundled, the main thread's CPU to tools/list dropped by about a quarter).
//
// The codecell packages stay external, imported by name as before: they find files beside themselves
// (the sandbox's worker script and wasm, the lazy `require` of zod, MiniSearch, better-sqlite3, ioredis
// and the TypeScript transformer), and some keep one registry per process (plugin namespaces), so there
// must be exactly one copy of each. The MCP connector is the exception: it shares the MCP SDK with the
// gateway, which must not load twice, and holds nothing that needs its own location.
import { readFileSync } from "node:fs";
import { build } from "esbuild";

const appDir = new URL("..", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", appDir), "utf8"));
const BUNDLED_WORKSPACE_PACKAGES = new Set(["@codecell/mcp-connector"]);
const external = Object.keys(manifest.dependencies)
  .filter((name) => name.startsWith("@codecell/") && !BUNDLED_WORKSPACE_PACKAGES.has(name))
  .flatMap((name) => [name, `${name}/*`]);

await build({
  absWorkingDir: new URL(".", appDir).pathname,
  entryPoints: ["src/cli.ts"],
  outfile: "dist/cli.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external,
  sourcemap: true,
  // CommonJS dependencies (ajv, cross-spawn) call `require` for Node's built-ins; an ES module has none.
  banner: {
    js: 'import { createRequire as __codecellCreateRequire } from "node:module";\nconst require = __codecellCreateRequire(import.meta.url);',
  },
  logLevel: "warning",
});
