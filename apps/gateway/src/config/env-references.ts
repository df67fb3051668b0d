import type { ConfigProblem } from "./config-problem.js";

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * Replaces `${NAME}` and `${NAME:-fallback}` in every string of a parsed config. A reference to an unset
 * variable without a fallback is a problem (not an empty string), so a missing secret fails loudly.
 */
export function expandEnvReferences(
  value: unknown,
  env: NodeJS.ProcessEnv,
  file: string,
  problems: ConfigProblem[],
  path: string[] = [],
): unknown {
  if (typeof value === "string") {
    return value.replace(REFERENCE, (whole, name: string, fallback: string | undefined) => {
      const found = env[name];
      if (found !== undefined && found !== "") return found;
      if (fallback !== undefined) return fallback;
      problems.push({
        file,
        path: path.join("."),
        message: `${whole} refers to the environment variable ${name}, which is not set. Set it, or write \${${name}:-default} to give a fallback.`,
      });
      return whole;
    });
  }
  if (Array.isArray(value)) {
    return value.map((item, index) =>
      expandEnvReferences(item, env, file, problems, [...path, String(index)]),
    );
  }
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = expandEnvReferences(item, env, file, problems, [...path, key]);
    }
    return out;
  }
  return value;
}
