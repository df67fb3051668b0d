import { mergeConfig } from "vitest/config";
import shared from "../vitest.shared.ts";

// The scripts are plain ES modules run by Node directly, so their tests are too.
export default mergeConfig(shared, { test: { include: ["test/**/*.test.mjs"] } });
