// The closing line of `npm test`: one sum over every package's vitest JSON report and turbo's record of
// each package's test task. A failure counts wherever it shows up (a failed test, a test file or suite that
// failed outside any test, a package whose test task failed without a report saying why), so the line never
// says "0 failed" about a run that exits non-zero. The line has exactly the README's form,
// `tests: N passed, N failed, N skipped`, so a tool that reads the plain `N passed, N failed` of any test
// runner reads it too; what kind of failures they were goes on the line before it.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Counts of one package's vitest JSON report. A file that failed while no test in it failed (an import
 * error, a failing hook, a suite-level error) is a failed file; its tests never ran, so nothing else counts it.
 */
export function countReport(report) {
  const counts = { passed: 0, failedTests: 0, failedFiles: 0, skipped: 0, unhandled: false, failures: [] };
  counts.passed = report.numPassedTests ?? 0;
  counts.failedTests = report.numFailedTests ?? 0;
  counts.skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  for (const file of report.testResults ?? []) {
    const assertions = file.assertionResults ?? [];
    const failedHere = assertions.filter((test) => test.status === "failed");
    for (const test of failedHere) counts.failures.push(`${file.name}: ${test.fullName ?? test.title}`);
    if (file.status === "failed" && failedHere.length === 0) {
      counts.failedFiles += 1;
      const reason = firstLine(file.message) || "failed outside any test";
      counts.failures.push(`${file.name}: ${reason}`);
    }
  }
  // vitest sets success false for errors it could not pin to a file (unhandled rejections, worker crashes).
  if (report.success === false && counts.failedTests === 0 && counts.failedFiles === 0)
    counts.unhandled = true;
  return counts;
}

function firstLine(text) {
  return typeof text === "string" ? (text.split("\n").find((line) => line.trim() !== "") ?? "").trim() : "";
}

/**
 * Sums packages into the closing line.
 * packages: [{ name, report (parsed JSON or null), exitCode (number, or null when turbo did not run it) }]
 * runExitCode: the exit code of the whole test command.
 * Returns { passed, failed, skipped, failures: string[], detail, line }: `line` is the closing line,
 * `detail` (null on a clean run) says what failed, for the line before it.
 */
export function summarize(packages, runExitCode) {
  let passed = 0;
  let failedTests = 0;
  let failedFiles = 0;
  let failedPackages = 0;
  let skipped = 0;
  const failures = [];
  for (const pkg of packages) {
    let failedHere = 0;
    if (pkg.report) {
      const counts = countReport(pkg.report);
      passed += counts.passed;
      skipped += counts.skipped;
      failedTests += counts.failedTests;
      failedFiles += counts.failedFiles;
      failedHere = counts.failedTests + counts.failedFiles;
      for (const failure of counts.failures) failures.push(`${pkg.name}: ${failure}`);
      if (counts.unhandled) {
        failedPackages += 1;
        failedHere += 1;
        failures.push(`${pkg.name}: vitest reported errors outside any test file (see its output above)`);
      }
    }
    // A test task that failed with nothing in its report (vitest crashed, no report written, a non-vitest
    // test script) still counts once.
    if (typeof pkg.exitCode === "number" && pkg.exitCode !== 0 && failedHere === 0) {
      failedPackages += 1;
      const why = pkg.report ? "its report shows no failure" : "it wrote no test report";
      failures.push(`${pkg.name}: the test task exited with code ${pkg.exitCode} and ${why}`);
    }
  }
  let failed = failedTests + failedFiles + failedPackages;
  let other = 0;
  if (runExitCode !== 0 && failed === 0) {
    other = 1;
    failed = 1;
    failures.push(`the test run exited with code ${runExitCode} without a failing package on record`);
  }
  const parts = [];
  if (failedTests) parts.push(plural(failedTests, "test"));
  if (failedFiles) parts.push(plural(failedFiles, "file"));
  if (failedPackages) parts.push(plural(failedPackages, "package"));
  if (other) parts.push("run");
  const detail = failed > 0 ? `failures: ${parts.join(", ")}` : null;
  return { passed, failed, skipped, failures, detail, line: closingLine(passed, failed, skipped) };
}

/** The README's closing line, and nothing else on it. */
export function closingLine(passed, failed, skipped) {
  return `tests: ${passed} passed, ${failed} failed, ${skipped} skipped`;
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/**
 * The last two lines when a step before the tests (install, lint, typecheck, build) failed: what failed,
 * then the closing line.
 */
export function stepFailedLines(step, exitCode) {
  return [`failures: ${step} exited with code ${exitCode}; no test ran`, closingLine(0, 1, 0)];
}

/**
 * Reads turbo's run summary (`turbo run --summarize` writes .turbo/runs/<id>.json) into
 * package name -> { directory, exitCode }.
 */
export function readTurboSummary(file) {
  const summary = JSON.parse(readFileSync(file, "utf8"));
  const tasks = new Map();
  for (const task of summary.tasks ?? []) {
    if (task.task !== "test") continue;
    const exitCode = task.execution?.exitCode;
    tasks.set(task.package, {
      directory: task.directory,
      exitCode: typeof exitCode === "number" ? exitCode : null,
    });
  }
  return tasks;
}

/** The turbo run summaries written at or after `since` (ms), oldest first. */
export function turboSummariesSince(root, since) {
  const dir = join(root, ".turbo", "runs");
  if (!existsSync(dir)) return [];
  const found = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(".json")) continue;
    const file = join(dir, name);
    const summary = JSON.parse(readFileSync(file, "utf8"));
    const started = summary.execution?.startTime ?? 0;
    if (started + 1000 >= since) found.push({ file, started });
  }
  return found.sort((a, b) => a.started - b.started).map((entry) => entry.file);
}
