// What the builds that inline `@codecell/*` packages into one bundle share (the gateway's CLI,
// apps/gateway/scripts/bundle-cli.mjs, and the embedded engine, packages/engine/scripts/bundle-engine.mjs):
// where the workspace's packages are, how Node reaches each from the bundle's package, and the esbuild
// plugins that keep an inlined module behaving as it did as its own file. Build-time only; the callers
// pass esbuild's functions in (this folder has no esbuild of its own).
//
// Two rules every such bundle follows:
// - @codecell/sandbox/worker-start stays outside, loaded by name as the ES module it is, so the process
//   holds exactly one copy of the sandbox's process-wide state: the early worker it starts as it loads
//   (worker-start.js) and the compiled wasm with its checked prelude bytecode (wasm-module.js). The
//   inlined rest of the sandbox takes both modules' exports from that entry, which re-exports them.
// - An inlined module that reads `import.meta.url` (to load a library on demand from its own package)
//   gets its module's real location in its installed package (scripts/package-import-meta.mjs).
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** Loaded by name outside every bundle (see above). */
export const WORKER_START = "@codecell/sandbox/worker-start";
/** The sandbox modules whose exports a bundle takes from WORKER_START (it re-exports them). */
const SANDBOX_STATE_MODULES = ["worker-start.js", "wasm-module.js"];
const IMPORT_META_HELPER = fileURLToPath(new URL("package-import-meta.mjs", import.meta.url));
const PACKAGES_DIR = new URL("../packages/", import.meta.url);

/**
 * The workspace's packages (packages/*) by folder: name, main file (the `default` of its "." export),
 * workspace dependencies.
 */
export function workspacePackages() {
  const packagesDir = realpathSync(PACKAGES_DIR);
  const byDir = new Map();
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
    byDir.set(dir, {
      name: pkg.name,
      dir,
      main: join(dir, main),
      dependencies: Object.keys(pkg.dependencies ?? {}).filter((name) => name.startsWith("@codecell/")),
    });
  }
  const byName = new Map([...byDir.values()].map((pkg) => [pkg.name, pkg]));
  /** The workspace package a file belongs to, or undefined (an app's own files, node_modules). */
  const packageOf = (file) => {
    for (const [dir, pkg] of byDir) if (file.startsWith(`${dir}${sep}`)) return pkg;
    return undefined;
  };
  return { byDir, byName, packageOf };
}

/**
 * How Node reaches each workspace package from a package whose `@codecell/*` dependencies are
 * `rootDependencies`: the shortest chain of dependencies, by package name.
 */
export function dependencyChains(packages, rootDependencies) {
  const chains = new Map();
  let frontier = rootDependencies.filter((name) => packages.byName.has(name)).map((name) => [name]);
  while (frontier.length > 0) {
    const next = [];
    for (const chain of frontier) {
      const name = chain.at(-1);
      if (chains.has(name)) continue;
      chains.set(name, chain);
      for (const dependency of packages.byName.get(name).dependencies) next.push([...chain, dependency]);
    }
    frontier = next;
  }
  return chains;
}

/** The sandbox's state modules, imported by the inlined sandbox, are WORKER_START's exports. */
export function sandboxStateFromWorkerStart(packages) {
  return {
    name: "sandbox-state-from-worker-start",
    setup(build) {
      build.onResolve({ filter: /^\.\/[\w-]+\.js$/ }, (args) => {
        if (packages.packageOf(args.importer)?.name !== "@codecell/sandbox") return undefined;
        const file = args.path.slice(2);
        if (SANDBOX_STATE_MODULES.includes(file)) return { path: WORKER_START, external: true };
        if (file === "prelude-bytecode.js") {
          throw new Error(`${args.importer} imports ${args.path}, which only ${WORKER_START} may load`);
        }
        return undefined;
      });
    },
  };
}

/**
 * Each inlined module of a workspace package that reads `import.meta` gets its place in its installed
 * package instead. `chains` (dependencyChains) say how to reach each package from the bundle's;
 * `inPlace` names a package whose modules keep the bundle's own `import.meta` (the bundle's package,
 * whose dependencies resolve from the bundle's file as they did from its modules). `transform` is
 * esbuild's.
 */
export function inlinedImportMeta({ packages, chains, transform, inPlace, bundleName }) {
  return {
    name: "inlined-import-meta",
    setup(build) {
      build.onLoad({ filter: /\.js$/ }, async (args) => {
        const pkg = packages.packageOf(args.path);
        if (pkg === undefined || pkg.name === inPlace) return undefined;
        const source = readFileSync(args.path, "utf8");
        if (!source.includes("import.meta")) return undefined;
        const chain = chains.get(pkg.name);
        if (chain === undefined)
          throw new Error(`${pkg.name} is bundled but ${bundleName} does not depend on it`);
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
}

/** Every name a bundle takes from WORKER_START must be one it exports. `build` is esbuild's. */
export async function checkWorkerStartExports(packages, build) {
  const sandboxDir = dirname(packages.byName.get("@codecell/sandbox").main);
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
