import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { countReport, readTurboSummary, stepFailedLines, summarize } from "../test-summary.mjs";

const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

/**
 * The closing line's form as the README states it (`tests: N passed, N failed, N skipped`), made a
 * pattern: every closing line must be exactly that, with nothing added inside or after it.
 */
function readmeClosingForm() {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const stated = /`(tests: N passed, N failed, N skipped)`/.exec(readme)?.[1];
  if (!stated) throw new Error("the README no longer states the closing line's form");
  return new RegExp(`^${stated.replaceAll("N", "\\d+")}$`);
}
const closingForm = readmeClosingForm();
/** The form any runner's summary reader looks for: `N passed, N failed`, alone on its line. */
const plainForm = /^(\w+: )?\d+ passed, \d+ failed(, \d+ skipped)?$/;

function expectClosing(line) {
  expect(line).toMatch(closingForm);
  expect(line).toMatch(plainForm);
}
const scratch = mkdtempSync(join(tmpdir(), "codecell-summary-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs the repository's vitest on a throwaway project and returns the JSON report it writes. */
function realVitestReport(files) {
  const project = mkdtempSync(join(scratch, "project-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(project, name), text);
  writeFileSync(join(project, "vitest.config.mjs"), "export default {};\n");
  const outputFile = join(project, "report.json");
  const vitest = join(root, "node_modules", "vitest", "vitest.mjs");
  const result = spawnSync(
    process.execPath,
    [vitest, "run", "--root", project, "--globals", "--reporter=json", `--outputFile=${outputFile}`],
    { encoding: "utf8", timeout: 60_000 },
  );
  return { exitCode: result.status, report: JSON.parse(readFileSync(outputFile, "utf8")) };
}

const passing = `it("adds", () => { expect(1 + 1).toBe(2); });\n`;
const failingTest = `it("is wrong", () => { expect(1 + 1).toBe(3); });\n`;
const brokenImport = `import "./missing-module.js";\nit("never runs", () => {});\n`;
const failingHook = `beforeAll(() => { throw new Error("setup broke"); });\nit("needs setup", () => {});\n`;

describe("the closing line of npm test, over real vitest reports", () => {
  it("counts a test file that fails to load, where no test fails", () => {
    const { exitCode, report } = realVitestReport({ "ok.test.js": passing, "broken.test.js": brokenImport });
    expect(exitCode).not.toBe(0);
    const counts = countReport(report);
    expect(counts.failedFiles).toBe(1);
    expect(counts.failures.join("\n")).toMatch(/broken\.test\.js/);
    const result = summarize([{ name: "@codecell/x", report, exitCode }], exitCode);
    expect(result.line).toBe("tests: 1 passed, 1 failed, 0 skipped");
    expect(result.detail).toBe("failures: 1 file");
  });

  it("counts a failing test and a file whose setup hook throws", () => {
    const { exitCode, report } = realVitestReport({
      "wrong.test.js": failingTest,
      "hook.test.js": failingHook,
      "ok.test.js": passing,
    });
    const result = summarize([{ name: "@codecell/x", report, exitCode }], exitCode);
    expect(exitCode).not.toBe(0);
    expect(result.failed).toBeGreaterThanOrEqual(2);
    expectClosing(result.line);
    expect(result.line).toMatch(/^tests: 1 passed, [2-9] failed, \d+ skipped$/);
    expect(result.detail).toMatch(/^failures: /);
    expect(result.failures.some((line) => line.includes("wrong.test.js"))).toBe(true);
    expect(result.failures.some((line) => line.includes("hook.test.js"))).toBe(true);
  });

  it("says 0 failed only for a clean run", () => {
    const { exitCode, report } = realVitestReport({ "ok.test.js": passing });
    expect(exitCode).toBe(0);
    const result = summarize([{ name: "@codecell/x", report, exitCode }], 0);
    expect(result.line).toBe("tests: 1 passed, 0 failed, 0 skipped");
    expectClosing(result.line);
    expect(result.detail).toBeNull();
  });
});

describe("failures a report does not show", () => {
  const cleanReport = { success: true, numPassedTests: 5, numFailedTests: 0, testResults: [] };

  it("counts a package whose test task failed without writing a report", () => {
    const result = summarize(
      [
        { name: "@codecell/a", report: cleanReport, exitCode: 0 },
        { name: "@codecell/b", report: null, exitCode: 1 },
      ],
      1,
    );
    expect(result.line).toBe("tests: 5 passed, 1 failed, 0 skipped");
    expect(result.detail).toBe("failures: 1 package");
    expect(result.failures).toEqual([
      "@codecell/b: the test task exited with code 1 and it wrote no test report",
    ]);
  });

  it("counts a package whose report says all passed while its task failed", () => {
    const result = summarize([{ name: "@codecell/a", report: cleanReport, exitCode: 2 }], 2);
    expect(result.failed).toBe(1);
  });

  it("counts errors vitest could not pin to a file", () => {
    const report = { ...cleanReport, success: false };
    const result = summarize([{ name: "@codecell/a", report, exitCode: 1 }], 1);
    expect(result.line).toBe("tests: 5 passed, 1 failed, 0 skipped");
  });

  it("never says 0 failed when the run exits non-zero, even with nothing on record", () => {
    const result = summarize([{ name: "@codecell/a", report: cleanReport, exitCode: null }], 1);
    expect(result.failed).toBe(1);
    expect(result.line).toBe("tests: 5 passed, 1 failed, 0 skipped");
    expect(result.detail).toBe("failures: run");
  });

  it("names a step that failed before any test ran, on the line before the closing line", () => {
    const [detail, line] = stepFailedLines("lint, typecheck and build", 2);
    expect(detail).toBe("failures: lint, typecheck and build exited with code 2; no test ran");
    expect(line).toBe("tests: 0 passed, 1 failed, 0 skipped");
    expectClosing(line);
    expect(detail).not.toMatch(/\d+ passed/);
  });

  it("keeps the closing line in the README's form whatever failed", () => {
    const failing = { success: false, numPassedTests: 2357, numFailedTests: 3, numPendingTests: 5 };
    failing.testResults = [
      { name: "a.test.ts", status: "failed", assertionResults: [{ status: "failed", title: "x" }] },
      { name: "b.test.ts", status: "failed", message: "import broke", assertionResults: [] },
    ];
    const result = summarize(
      [
        { name: "@codecell/a", report: failing, exitCode: 1 },
        { name: "@codecell/b", report: null, exitCode: 1 },
      ],
      1,
    );
    expect(result.line).toBe("tests: 2357 passed, 5 failed, 5 skipped");
    expectClosing(result.line);
    expect(result.detail).toBe("failures: 3 tests, 1 file, 1 package");
    for (const failure of result.failures) expect(failure).not.toMatch(plainForm);
  });

  it("reads each package's test exit code from turbo's run summary", () => {
    const folder = join(scratch, "turbo");
    mkdirSync(folder, { recursive: true });
    const file = join(folder, "run.json");
    writeFileSync(
      file,
      JSON.stringify({
        execution: { startTime: 1 },
        tasks: [
          { task: "test", package: "@codecell/a", directory: "packages/a", execution: { exitCode: 0 } },
          { task: "test", package: "@codecell/b", directory: "packages/b", execution: { exitCode: 1 } },
          { task: "build", package: "@codecell/b", directory: "packages/b", execution: { exitCode: 0 } },
        ],
      }),
    );
    const tasks = readTurboSummary(file);
    expect(tasks.get("@codecell/a")?.exitCode).toBe(0);
    expect(tasks.get("@codecell/b")?.exitCode).toBe(1);
  });
});
