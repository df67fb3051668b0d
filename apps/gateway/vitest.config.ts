import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig, mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

// The end-to-end tests spawn the built CLI, so the app is compiled once before they run. Runs of the
// embedded default keep their state in a fresh folder, never in the user's data folder.
const dataDir = mkdtempSync(join(tmpdir(), "codecell-gateway-data-"));

export default mergeConfig(
  shared,
  defineConfig({
    test: {
      globalSetup: ["test/build-cli.ts"],
      testTimeout: 60_000,
      hookTimeout: 90_000,
      fileParallelism: false,
      env: { CODECELL_DATA_DIR: dataDir },
    },
  }),
);
