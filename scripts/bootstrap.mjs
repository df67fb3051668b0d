#!/usr/bin/env node
// The README's two commands (`npm start`, `npm test`) land here. They must work on a machine that has
// only Node 20 and npm, so this script fetches the pinned pnpm through npx instead of expecting a global
// one, installs the workspace, and then runs the task through turbo.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readTurboSummary, stepFailedLines, summarize, turboSummariesSince } from "./test-summary.mjs";

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

/** Runs the commands side by side, each on the terminal; resolves with their exit statuses. */
function runTogether(commands) {
  return Promise.all(
    commands.map(
      (args) =>
        new Promise((resolve) => {
          const shown = args.join(" ");
          console.log(`\n> ${shown}`);
          const child = spawn(args[0], args.slice(1), { cwd: root, stdio: "inherit", env });
          child.on("error", (error) => {
            console.error(`codecell: could not run "${shown}": ${error.message}`);
            resolve(1);
          });
          child.on("exit", (code) => resolve(code ?? 1));
        }),
    ),
  );
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

// The folders of the workspace's packages, where each package's vitest run writes its JSON report.
function workspaceFolders() {
  const folders = [join(root, "scripts")];
  for (const group of ["packages", "apps"]) {
    const dir = join(root, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) folders.push(join(dir, name));
  }
  return folders.filter((folder) => existsSync(join(folder, "package.json")));
}

const reportOf = (folder) => join(folder, "test-results", "vitest.json");

// A report cut short (a crashed run) reads as no report; the package's exit code still counts it.
function readReport(file) {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch {
    return null;
  }
}

// A step before the tests failed: the closing line still says so, with a failure counted.
function mustRunBeforeTests(step, args) {
  const status = run(args);
  if (status !== 0) {
    console.error(`codecell: "${args.join(" ")}" failed with exit code ${status}`);
    console.log(`\n${stepFailedLines(step, status).join("\n")}`);
    process.exit(status);
  }
}

if (command === "test") {
  mustRunBeforeTests("install", pnpm("install", "--frozen-lockfile"));
  mustRunBeforeTests("lint, typecheck and build", pnpm("exec", "turbo", "run", "lint", "typecheck", "build"));
  // Reports left by an earlier run must not be counted as this run's.
  for (const folder of workspaceFolders()) rmSync(reportOf(folder), { force: true });
  const started = Date.now();
  // The gateway's end-to-end files run one after another (each starts gateways, replicas or servers and
  // mostly waits on them) and take about as long as every other package's tests together, which run one
  // package at a time: the two go side by side, so both cores are used without running more than two
  // suites at once.
  const gateway = "@codecell/gateway";
  const turboTest = (...filter) =>
    pnpm("exec", "turbo", "run", "test", ...filter, "--continue", "--summarize");
  const statuses = await runTogether([
    turboTest(`--filter=${gateway}`),
    turboTest(`--filter=!${gateway}`, "--concurrency=1"),
  ]);
  const status = statuses.find((code) => code !== 0) ?? 0;
  const tasks = new Map();
  for (const file of turboSummariesSince(root, started)) {
    for (const [name, task] of readTurboSummary(file)) tasks.set(name, task);
  }
  const packages = workspaceFolders().map((folder) => {
    const name = JSON.parse(readFileSync(join(folder, "package.json"), "utf8")).name ?? folder;
    const report = readReport(reportOf(folder));
    return { name, report, exitCode: tasks.get(name)?.exitCode ?? null };
  });
  const result = summarize(packages, status);
  if (result.failures.length > 0) {
    console.log("\nfailed:");
    for (const failure of result.failures) console.log(`  ${failure}`);
  }
  console.log(result.detail ? `\n${result.detail}\n${result.line}` : `\n${result.line}`);
  process.exit(status !== 0 ? status : result.failed > 0 ? 1 : 0);
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
