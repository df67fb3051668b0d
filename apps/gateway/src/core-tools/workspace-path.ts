import { existsSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { CodeModeError } from "@codecell/contract";

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** The deepest existing ancestor of a path, resolved through symlinks. */
function realExistingAncestor(path: string): string {
  let current = path;
  for (let depth = 0; depth < 4096; depth++) {
    if (existsSync(current)) return realpathSync(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return current;
}

/**
 * Maps a tool's `path` argument to a real location inside the workspace. Refused: non-strings, NUL
 * bytes, `..` that climbs out, absolute paths elsewhere, and any symlink on the way that points out.
 * The check is made on the real path of the deepest part that exists, so a file created later still
 * lands inside. This check alone races with a process that swaps links; the file tools open through
 * `WorkspaceFiles`, which does not.
 */
export function resolveWorkspacePath(
  workspace: string,
  path: unknown,
  tool: string,
  options: { followLinks?: boolean } = {},
): string {
  if (typeof path !== "string" || path === "") {
    throw new CodeModeError(
      "invalid_input",
      `${tool} needs "path": a path relative to the workspace, such as "notes/todo.md".`,
    );
  }
  if (path.includes("\0"))
    throw new CodeModeError("invalid_input", `${tool}: "path" must not contain NUL bytes.`);
  const target = resolve(workspace, path);
  const refuse = (why: string) =>
    new CodeModeError(
      "invalid_input",
      `${tool}: "${path}" ${why}; only files inside the workspace can be used. Pass a path relative to the workspace root.`,
      { path, reason: "outside_workspace" },
    );
  if (!inside(workspace, target))
    throw refuse(
      isAbsolute(path) ? "is an absolute path outside the workspace" : "climbs out of the workspace",
    );
  // The file tools check links themselves, one held directory at a time (workspace-files.ts).
  if (options.followLinks === false) return target;
  const real = realExistingAncestor(target);
  if (!inside(workspace, real))
    throw refuse("goes through a symbolic link that points outside the workspace");
  return target;
}

/** The path as the guest should see it: relative to the workspace, with "/" separators. */
export function workspaceRelative(workspace: string, path: string): string {
  return relative(workspace, path).split(sep).join("/") || ".";
}
