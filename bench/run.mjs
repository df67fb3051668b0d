// Runs the benches of the named areas (every area when none is named), one after another, so no two
// benches compete for the machine. `pnpm bench` at the root reaches this through turbo.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

// In dependency order: a package's bench runs before the benches of the packages built on it.
const AREAS = {
  "mcp-declarations": ["render.bench.mjs"],
  catalog: ["catalog.bench.mjs"],
  transpile: ["transpile.bench.mjs"],
  typecheck: ["typecheck.bench.mjs"],
  sandbox: ["sandbox.bench.mjs", "fairness.bench.mjs"],
  "snapshot-store": ["snapshot-store.bench.mjs"],
  "mcp-connector": ["connector.bench.mjs"],
  engine: ["engine.bench.mjs", "tracing.bench.mjs", "typecheck-first.bench.mjs"],
  gateway: [
    "gateway.bench.mjs",
    "performance.bench.mjs",
    "placement.mjs",
    "replicas.bench.mjs",
    "hostile.bench.mjs",
    "load.bench.mjs",
    "agent-endpoint.bench.mjs",
    "agent-hostile.bench.mjs",
  ],
  playground: ["playground.bench.mjs"],
};

const asked = process.argv.slice(2);
const unknown = asked.filter((area) => !(area in AREAS));
if (unknown.length > 0) {
  console.error(`Unknown bench area ${unknown.join(", ")}. Areas: ${Object.keys(AREAS).join(", ")}.`);
  process.exit(2);
}
for (const area of asked.length > 0 ? asked : Object.keys(AREAS)) {
  for (const script of AREAS[area]) {
    console.log(`\n== ${area}/${script}`);
    const run = spawnSync(process.execPath, [script], {
      cwd: fileURLToPath(new URL(`./${area}/`, import.meta.url)),
      stdio: "inherit",
    });
    if (run.status !== 0) {
      console.error(`${area}/${script} failed: ${run.error?.message ?? `exit ${run.status ?? run.signal}`}`);
      process.exit(run.status ?? 1);
    }
  }
}
