// biome-ignore-all lint/suspicious/noUndeclaredEnvVars: CODECELL_TEST_TMPDIR is set by this file in each vitest process; turbo must not pass one in, or two packages would share (and remove) one folder
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Tests run against each workspace package's TypeScript source (the "@codecell/source" export
// condition) so no build is needed first; Node itself resolves the built `dist` files.
export const sourceConditions = ["@codecell/source"];

// Every folder a test run makes (its own, and those of the processes it starts) goes under one fresh
// folder, which the run removes when it ends: a test run leaves nothing behind in the system's temp
// folder. Set here, while the config loads, so the folders a package's config makes go under it too.
if (process.env.CODECELL_TEST_TMPDIR === undefined) {
  process.env.CODECELL_TEST_TMPDIR = mkdtempSync(join(tmpdir(), "codecell-test-"));
  process.env.TMPDIR = process.env.CODECELL_TEST_TMPDIR;
}

export default defineConfig({
  resolve: { conditions: [...sourceConditions, "import", "module", "node", "default"] },
  ssr: { resolve: { conditions: [...sourceConditions, "import", "node", "default"] } },
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    globalSetup: [fileURLToPath(new URL("./scripts/vitest-temp-root.ts", import.meta.url))],
    // The JSON report lets `npm test` end on one summed "N passed, N failed" line.
    reporters: ["default", ["json", { outputFile: "test-results/vitest.json" }]],
  },
});
