import type { z } from "zod";
import { issueMessage, knownKeysAt, unknownKeyMessage } from "./config-messages.js";
import type { ConfigProblem } from "./config-problem.js";
import { FIELD_HINTS } from "./config-schema.js";

/** Config paths whose value is a secret: only its length is ever shown. */
const SECRET_PATH =
  /^(http\.tokens\.\d+\.token|snapshotStore\.secret|snapshotStore\.url|snapshotStore\.password)$/;

/** The "expected ..." hint for a config path; entries of records and arrays share their field's hint. */
function hintFor(path: string): string | undefined {
  const key = path
    .replace(/^mcpServers\.[^.]+\./, "")
    .replace(/^plugins\.\d+\./, "")
    .replace(/^http\.tokens\.\d+\./, "http.tokens.")
    .replace(/^snapshotStore\.sentinels\.\d+\./, "snapshotStore.sentinels.");
  return FIELD_HINTS[path] ?? FIELD_HINTS[key] ?? FIELD_HINTS[key.replace(/\.\d+$/, "")];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current = root;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/**
 * Every validator issue as a problem in our words (see config-messages.ts): the path, what was found, what
 * is accepted, and for an unknown key the nearest known key of the object it sits in, at any depth.
 * `base` is where `input` sits in the config file (an MCP server entry is checked on its own).
 */
export function zodProblems(
  error: z.ZodError,
  input: unknown,
  file: string,
  schema: unknown,
  base: string[] = [],
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of error.issues) {
    const segments = [...base, ...issue.path.map(String)];
    if (issue.code === "unrecognized_keys") {
      const known = knownKeysAt(schema, issue.path);
      for (const key of issue.keys) {
        problems.push({ file, path: [...segments, key].join("."), message: unknownKeyMessage(key, known) });
      }
      continue;
    }
    const path = segments.join(".");
    // A bad key of a record (a server id) is explained by what a name there may be.
    const hint =
      issue.code === "invalid_key" ? hintFor(`${segments.slice(0, -1).join(".")}.<name>`) : hintFor(path);
    const raw = valueAt(input, issue.path);
    // A secret (a token, the store secret, a Redis URL with its password) is never echoed into an error
    // message (and so into logs): only its length is.
    const shown =
      SECRET_PATH.test(path) && typeof raw === "string" ? `a secret of ${raw.length} characters` : undefined;
    problems.push({
      file,
      path,
      message: issueMessage(issue, raw, {
        schema,
        path: issue.path,
        ...(hint ? { hint } : {}),
        ...(shown ? { shown } : {}),
      }),
    });
  }
  return problems;
}
