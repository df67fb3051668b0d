import { readFileSync } from "node:fs";

/** The app's version, read once from its package.json. */
export const GATEWAY_VERSION: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;
