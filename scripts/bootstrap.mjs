#!/usr/bin/env node
// The README's two commands (`npm start`, `npm test`) land here. They must work on a machine that has
// only Node 20 and npm, so this script fetches the pinned pnpm through npx instead of expecting a global
// one, installs the workspace, and then runs the task through turbo.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const { packageManager } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const command = process.argv[2];
const env = {
  ...process.env,
  TURBO_TELEMETRY_DISABLED: "1",
  TURBO_NO_UPDATE_NOTIFIER: "1",
  DO_NOT_TRACK: "1",
  npm_config_update_notifier: "false",
};

function run(args, options = {}) {
  const shown = args.join(" ");
  console.log(`\n> ${shown}`);
  const result = spawnSync(args[0], args.slice(1), { cwd: root, stdio: "inherit", env, ...options });
  if (result.error) {
    console.error(`codecell: could not run "${shown}": ${result.error.message}`);
    process.exit(1);
  }
  return result.status ?? 1;
}

function pnpm(...args) {
  return ["npx", "--yes", packageManager, ...args];
}

function mustRun(args) {
  const status = run(args);
  if (status !== 0) {
    console.error(`codecell: "${args.join(" ")}" failed with exit code ${status}`);
    process.exit(status);
  }
}

// Sums the JSON reports every package's vitest run writes, so the run ends on one plain line.
function summarizeTests() {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const group of ["packages", "apps"]) {
    const dir = join(root, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const report = join(dir, name, "test-results", "vitest.json");
      if (!existsSync(report)) continue;
      const data = JSON.parse(readFileSync(report, "utf8"));
      passed += data.numPassedTests ?? 0;
      failed += data.numFailedTests ?? 0;
      skipped += (data.numPendingTests ?? 0) + (data.numTodoTests ?? 0);
    }
  }
  console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
}

if (command === "test") {
  mustRun(pnpm("install", "--frozen-lockfile"));
  mustRun(pnpm("exec", "turbo", "run", "lint", "typecheck", "build"));
  const status = run(pnpm("exec", "turbo", "run", "test", "--concurrency=1", "--continue"));
  summarizeTests();
  process.exit(status);
} else if (command === "start") {
  mustRun(pnpm("install", "--frozen-lockfile"));
  mustRun(pnpm("exec", "turbo", "run", "build"));
  const gateway = join(root, "apps", "gateway", "dist", "cli.js");
  if (existsSync(gateway)) {
    process.exit(run(["node", gateway, "serve", "--http", "8787", ...process.argv.slice(3)]));
  }
  console.log("\ncodecell is built. The gateway app is not part of this checkout yet, so nothing is served.");
} else {
  console.error("usage: node scripts/bootstrap.mjs <start|test>");
  process.exit(2);
}
