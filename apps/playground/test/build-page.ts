import { fileURLToPath } from "node:url";
import { build } from "vite";

/** Builds the page into dist/ once before the tests, so the gateway serves what users get. */
export default async function setup(): Promise<void> {
  const root = fileURLToPath(new URL("..", import.meta.url));
  await build({ root, logLevel: "warn", configFile: `${root}vite.config.ts` });
}
