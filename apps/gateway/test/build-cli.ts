import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/**
 * Compiles the app (tsc, a few seconds) and bundles the CLI, as `pnpm build` does, so the tests spawn
 * the CLI exactly as users run it.
 */
export default function setup(): void {
  const appDir = fileURLToPath(new URL("..", import.meta.url));
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: appDir, stdio: "inherit" });
  execFileSync(process.execPath, ["scripts/bundle-cli.mjs"], { cwd: appDir, stdio: "inherit" });
}
