import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_DIR } from "./package-dir.js";

/** The app's version, read once from its package.json. */
export const GATEWAY_VERSION: string = (
  JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8")) as { version: string }
).version;
