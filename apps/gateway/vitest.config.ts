import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig, mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

// The end-to-end tests spawn the built CLI, so the app is compiled once before they run. Runs of the
// embedded default keep their state in a fresh folder, never in the user's data folder, and the CLI's
// code cache goes to a fresh folder too, never to the user's cache folder.
const dataDir = mkdtempSync(join(tmpdir(), "codecell-gateway-data-"));
const cacheDir = mkdtempSync(join(tmpdir(), "codecell-gateway-cache-"));

export default mergeConfig(
  shared,
  defineConfig({
    test: {
      globalSetup: ["test/build-cli.ts"],
      testTimeout: 60_000,
      hookTimeout: 90_000,
      fileParallelism: false,
      env: { CODECELL_DATA_DIR: dataDir, CODECELL_CACHE_DIR: cacheDir },
    },
  }),
);
