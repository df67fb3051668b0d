import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APP_DIR, baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// The official MCP conformance suite against `codecell serve --http`: its server scenarios that apply to
// a gateway whose only tools are exec and wait, each at the protocol revisions it covers. The suite's
// 0.2 pre-releases (the ones with 2026-07-28 scenarios) import Node 22's fs.globSync; on Node 20 they run
// with the resolve hook of support/node22-fs.

const require = createRequire(import.meta.url);
const SUITE = join(
  require.resolve("@modelcontextprotocol/conformance/package.json"),
  "..",
  "dist",
  "index.js",
);
const FS_HOOK = join(APP_DIR, "test", "support", "node22-fs", "register.mjs");

/** The scenarios that apply, each with the revisions it runs at. */
const SCENARIOS: Array<[scenario: string, versions: string[]]> = [
  ["server-initialize", ["2025-11-25"]],
  ["server-session-lifecycle", ["2025-11-25"]],
  ["ping", ["2025-11-25"]],
  ["logging-set-level", ["2025-11-25"]],
  ["tools-list", ["2025-11-25", "2026-07-28"]],
  ["dns-rebinding-protection", ["2025-11-25", "2026-07-28"]],
  ["server-sse-multiple-streams", ["2025-11-25", "2026-07-28"]],
  ["server-stateless", ["2026-07-28"]],
  ["caching", ["2026-07-28"]],
  ["http-header-validation", ["2026-07-28"]],
];

/** Scenarios left out, and why: each needs something a gateway exposing only exec and wait has not. */
const EXCLUDED_SCENARIOS: Record<string, string> = {
  "tools-call-*, tools-call-with-*, json-schema-2020-12, server-sse-polling":
    "call the suite's own test tools (test_simple_text, test_image_content, ...); the gateway lists only exec and wait",
  "input-required-result-*":
    "drive the suite's test tools that ask for input; the gateway's input requests (approvals) are tested in protocol-eras.e2e.test.ts",
  "tools-call-sampling, tools-call-elicitation, elicitation-sep*":
    "need test tools that sample or elicit; the gateway elicits only to approve a nested call",
  "prompts-*, completion-complete, resources-subscribe, resources-unsubscribe":
    "the gateway offers no prompts, completions or resource subscriptions",
  "resources-list, resources-read-*, resources-templates-read, sep-2164-resource-not-found":
    "expect the suite's test resources (test://static-text, ...); the gateway's two resources are tested in mcp-resources.e2e.test.ts",
  "http-custom-header-server-validation":
    "needs a tool whose input schema has x-mcp-header annotations; exec and wait have none",
  "tasks-*, sep-2640-skills-*": "extensions the gateway does not serve",
};

/** Checks left out of scenarios that run, and why. */
const EXCLUDED_CHECKS: Record<string, string> = {
  "sep-2575-server-rejects-undeclared-capability":
    "calls the suite's diagnostic tool test_missing_capability, which the gateway does not have",
  "sep-2575-missing-capability-http-400": "the same diagnostic tool",
  "sep-2575-server-sends-tools-list-changed-on-subscription":
    "calls the suite's test_trigger_tool_change to change the tool list (a warning, not a failure)",
  "sep-2549-prompts-list-caching-hints":
    "the gateway declares no prompts capability, so prompts/list is not there",
};

/**
 * The 2026-07-28 error requirements, named so that a renamed or dropped check cannot pass unnoticed: the
 * request id on every error, -32602 for a missing `_meta` field, 404 with -32601 for removed methods,
 * -32020 on a header mismatch (the ids are prefixes: a scenario repeats some for each case it tries).
 */
const REQUIRED_CHECKS: Record<string, string[]> = {
  "server-stateless": [
    "sep-2575-http-server-error-jsonrpc-id",
    "sep-2575-request-meta-invalid-",
    "sep-2575-http-server-method-not-found-404",
    "sep-2575-http-server-method-not-found-404-initialize",
    "sep-2575-http-server-header-mismatch-400",
    "sep-2575-server-implements-discover",
  ],
  "http-header-validation": ["sep-2243-server-reject-error-code", "sep-2243-server-reject-invalid-headers"],
};

type Check = { id: string; status: string; errorMessage?: string };

function runScenario(mcpUrl: string, scenario: string, version: string, outDir: string): Promise<string> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        "--import",
        FS_HOOK,
        SUITE,
        "server",
        "--url",
        mcpUrl,
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "-o",
        join(outDir, "results"),
      ],
      { cwd: outDir, timeout: 90_000, maxBuffer: 16 * 1024 * 1024 },
      // The suite exits non-zero when any check fails, excluded ones too: the checks decide below.
      (_error, stdout, stderr) => resolve(`${stdout}${stderr}`),
    ).once("error", () => {});
  });
}

function readChecks(dir: string): Check[] {
  const results = join(dir, "results");
  const runs = readdirSync(results);
  if (runs.length !== 1)
    throw new Error(`expected one result folder in ${results}, found ${runs.join(", ")}`);
  return JSON.parse(readFileSync(join(results, runs[0]!, "checks.json"), "utf8")) as Check[];
}

describe("the MCP conformance suite against serve --http", () => {
  let gateway: HttpGateway;

  beforeAll(async () => {
    gateway = await startHttpGateway(makeSetup(baseConfig({ mcpServers: {} })).configPath);
    for (const [scenarios, reason] of Object.entries(EXCLUDED_SCENARIOS)) {
      console.info(`conformance: not run: ${scenarios}: ${reason}`);
    }
    for (const [check, reason] of Object.entries(EXCLUDED_CHECKS)) {
      console.info(`conformance: check not required: ${check}: ${reason}`);
    }
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  for (const [scenario, versions] of SCENARIOS) {
    for (const version of versions) {
      it(`${scenario} at ${version}`, { timeout: 120_000 }, async () => {
        const dir = mkdtempSync(join(tmpdir(), "codecell-conformance-"));
        const output = await runScenario(gateway.mcpUrl, scenario, version, dir);
        let checks: Check[];
        try {
          checks = readChecks(dir);
        } catch (error) {
          throw new Error(`${(error as Error).message}\nthe suite said:\n${output}`);
        }
        expect(checks.length).toBeGreaterThan(0);
        // Not skipped as inapplicable: the scenario really ran its checks at this revision.
        expect(checks.some((check) => check.status === "SUCCESS")).toBe(true);
        const failed = checks
          .filter((check) => check.status === "FAILURE" && !(check.id in EXCLUDED_CHECKS))
          .map((check) => `${check.id}: ${check.errorMessage ?? "failed"}`);
        expect(failed).toEqual([]);
        for (const prefix of REQUIRED_CHECKS[scenario] ?? []) {
          const matching = checks.filter((check) => check.id.startsWith(prefix));
          expect(matching.length, `no check ${prefix}* ran`).toBeGreaterThan(0);
          expect(matching.map((check) => `${check.id}: ${check.status}`)).toEqual(
            matching.map((check) => `${check.id}: SUCCESS`),
          );
        }
      });
    }
  }
});
