import { CodeModeError, type ToolSource } from "@codecell/contract";
import { toolId } from "./tool-id.js";

/** Allow and deny lists over catalog ids or tool names; `*` matches any run of characters. */
export type ToolPolicy = { allow?: readonly string[] | undefined; deny?: readonly string[] | undefined };

export type PolicyCheck = (id: string, name: string) => boolean;

/**
 * Compiles the policy into one predicate. No allow list means "everything not denied"; an allow list
 * (even an empty one) admits only what it matches. Deny always wins.
 */
export function compilePolicy(policy: ToolPolicy): PolicyCheck {
  const allow = policy.allow === undefined ? undefined : compileList("allow", policy.allow);
  const deny = policy.deny === undefined ? [] : compileList("deny", policy.deny);
  return (id, name) => {
    if (deny.some((pattern) => pattern.test(id) || pattern.test(name))) return false;
    if (allow === undefined) return true;
    return allow.some((pattern) => pattern.test(id) || pattern.test(name));
  };
}

function compileList(field: "allow" | "deny", patterns: unknown): RegExp[] {
  if (!Array.isArray(patterns)) {
    throw new CodeModeError(
      "invalid_config",
      `Tool policy "${field}" must be an array of tool ids or names (with optional * globs), got ${typeof patterns}.`,
      { field },
    );
  }
  return patterns.map((pattern, index) => {
    if (typeof pattern !== "string" || pattern.trim() === "") {
      throw new CodeModeError(
        "invalid_config",
        `Tool policy "${field}[${index}]" must be a non-empty string such as "core:host:exec", "read_file" or "mcp:github:*".`,
        { field, index },
      );
    }
    return globToRegExp(pattern.trim());
  });
}

function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "s");
}

/**
 * The tools a policy lets through, in their order, untouched: what a run shows the model when code mode
 * is off. The same rules as the catalog's (ids `<source>:<owner>:<name>` or names, deny wins).
 */
export function toolsAllowedBy<T extends { source: ToolSource; owner: string; name: string }>(
  tools: readonly T[],
  policy: ToolPolicy,
): T[] {
  const allowed = compilePolicy(policy);
  return tools.filter((tool) => allowed(toolId(tool.source, tool.owner, tool.name), tool.name));
}
