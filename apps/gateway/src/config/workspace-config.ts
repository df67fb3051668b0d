import { existsSync, realpathSync, statSync } from "node:fs";
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits } from "../core-tools/workspace-quota.js";
import type { ConfigProblem } from "./config-problem.js";
import { absolute } from "./resolve-module.js";

type WorkspaceEntry =
  | string
  | { path?: unknown; maxBytes?: number; maxWriteBytesPerRun?: number }
  | undefined;

/**
 * The `workspace` section: a folder path, or `{ path, maxBytes, maxWriteBytesPerRun }`. The folder must
 * exist; its real path is what the core file tools are confined to (null: no folder, those tools off).
 */
export function resolveWorkspace(
  raw: unknown,
  configDir: string,
  file: string,
  problems: ConfigProblem[],
): { workspace: string | null; workspaceLimits: WorkspaceLimits } {
  // Read before validation too: a `null` or other non-object there is the schema's problem, not a crash.
  const entry = (raw === null ? undefined : raw) as WorkspaceEntry;
  const workspaceLimits: WorkspaceLimits = {
    maxBytes: (typeof entry === "object" && entry.maxBytes) || DEFAULT_WORKSPACE_LIMITS.maxBytes,
    maxWriteBytesPerRun:
      (typeof entry === "object" && entry.maxWriteBytesPerRun) ||
      DEFAULT_WORKSPACE_LIMITS.maxWriteBytesPerRun,
  };
  const workspacePath = typeof entry === "string" ? entry : entry?.path;
  if (typeof workspacePath !== "string") return { workspace: null, workspaceLimits };
  const path = absolute(configDir, workspacePath);
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    problems.push({
      file,
      path: typeof entry === "string" ? "workspace" : "workspace.path",
      message: `folder ${path} does not exist. Create it or point "workspace" at an existing folder.`,
    });
    return { workspace: null, workspaceLimits };
  }
  return { workspace: realpathSync(path), workspaceLimits };
}
