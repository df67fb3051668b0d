import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Paths and module names in a config are read from the config file's folder. */

const gatewayRequire = createRequire(import.meta.url);

/** `path` made absolute against the config's folder (an absolute path stays as it is). */
export function absolute(configDir: string, path: string): string {
  return isAbsolute(path) ? path : resolve(configDir, path);
}

function isRelativeModule(spec: string): boolean {
  return spec.startsWith("./") || spec.startsWith("../") || isAbsolute(spec) || spec.startsWith("file:");
}

/** Resolves a module path or package name from the config's folder, then from the gateway itself. */
export function resolveModule(spec: string, configDir: string): string {
  if (isRelativeModule(spec)) {
    const path = spec.startsWith("file:") ? fileURLToPath(spec) : absolute(configDir, spec);
    if (!existsSync(path)) throw new Error(`no such file ${path}`);
    return path;
  }
  try {
    return createRequire(join(configDir, "codecell.config.js")).resolve(spec);
  } catch {
    // Not installed next to the config: the gateway's own dependencies are the second place to look.
    return gatewayRequire.resolve(spec);
  }
}
