import { defineConfig } from "vitest/config";

// Tests run against each workspace package's TypeScript source (the "@codecell/source" export
// condition) so no build is needed first; Node itself resolves the built `dist` files.
export const sourceConditions = ["@codecell/source"];

export default defineConfig({
  resolve: { conditions: [...sourceConditions, "import", "module", "node", "default"] },
  ssr: { resolve: { conditions: [...sourceConditions, "import", "node", "default"] } },
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // The JSON report lets `npm test` end on one summed "N passed, N failed" line.
    reporters: ["default", ["json", { outputFile: "test-results/vitest.json" }]],
  },
});
