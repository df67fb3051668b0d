import { defineConfig, mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

// Unit tests render into happy-dom (chosen per file); the browser tests drive real Chromium against a
// gateway child process, so the page is built once first and files run one at a time.
export default mergeConfig(
  shared,
  defineConfig({
    test: {
      globalSetup: ["test/build-page.ts"],
      testTimeout: 60_000,
      hookTimeout: 120_000,
      fileParallelism: false,
    },
  }),
);
