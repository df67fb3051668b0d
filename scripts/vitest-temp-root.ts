import { rmSync } from "node:fs";

/** Removes the test run's temp folder (vitest.shared.ts makes it) once every test file has run. */
export default function setup(): () => void {
  return () => {
    const root = process.env.CODECELL_TEST_TMPDIR;
    if (root !== undefined) rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  };
}
