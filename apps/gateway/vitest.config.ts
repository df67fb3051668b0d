import { defineConfig, mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

// The end-to-end tests spawn the built CLI, so the app is compiled once before they run.
export default mergeConfig(
  shared,
  defineConfig({
    test: {
      globalSetup: ["test/build-cli.ts"],
      testTimeout: 60_000,
      hookTimeout: 90_000,
      fileParallelism: false,
    },
  }),
);
