import { CodeModeError, closestMatches } from "@codecell/contract";
import type { McpApiFile } from "./types.js";

export type ApiFileInfo = { path: string; description: string; bytes: number };

export type ApiFileTable = {
  /** Metadata of the files at or under `prefix` (a directory or a file path), sorted by path. */
  list(prefix?: string): ApiFileInfo[];
  /** One file's content by its exact path. */
  read(path: string): string;
};

const encoder = new TextEncoder();

type Checked = { segments: string[]; normalized: string };

/**
 * The reference behaviour of the guest's `API.list` / `API.read` over the virtual declaration files.
 * Rules: paths are relative, `/`-separated and case-sensitive; one trailing `/` is allowed on a
 * prefix; empty, `.` and `..` segments, a leading `/` and backslashes are refused; `list()` with no
 * prefix (or `""`) lists everything; a prefix that names neither a directory nor a file, and a `read`
 * of anything but a file, are refused. Every refusal is a `CodeModeError` with code `invalid_input`.
 */
export function createApiFileTable(files: readonly McpApiFile[]): ApiFileTable {
  const byPath = new Map<string, ApiFileInfo & { content: string }>();
  const directories = new Set<string>();
  for (const file of files) {
    const bytes = encoder.encode(file.content).length;
    byPath.set(file.path, { path: file.path, description: file.description, bytes, content: file.content });
    const segments = file.path.split("/");
    for (let index = 1; index < segments.length; index++) directories.add(segments.slice(0, index).join("/"));
  }
  const sortedPaths = [...byPath.keys()].sort();
  const known = [...directories, ...sortedPaths];

  function check(operation: "list" | "read", value: unknown): Checked {
    if (typeof value !== "string") {
      throw new CodeModeError(
        "invalid_input",
        `API.${operation} takes a path string; got ${describe(value)}.`,
        {
          operation,
        },
      );
    }
    const trimmed = operation === "list" && value.endsWith("/") ? value.slice(0, -1) : value;
    const refuse = (why: string): never => {
      throw new CodeModeError("invalid_input", `API.${operation}(${JSON.stringify(value)}): ${why}`, {
        operation,
        path: value,
      });
    };
    if (value.startsWith("/")) refuse('paths are relative, like "mcp/index.d.ts"; drop the leading "/".');
    if (value.includes("\\")) refuse('use "/" to separate path segments.');
    const segments = trimmed.split("/");
    if (segments.some((segment) => segment === "." || segment === "..")) {
      refuse('"." and ".." segments are not allowed; name the file by its full path, like "mcp/index.d.ts".');
    }
    if (segments.some((segment) => segment === ""))
      refuse('a path segment is empty (look for a doubled "/").');
    return { segments, normalized: trimmed };
  }

  function unknownPath(operation: "list" | "read", value: string, candidates: string[]): never {
    const suggestions = closestMatches(value, candidates);
    const hint =
      suggestions.length > 0
        ? ` Did you mean ${suggestions.map((s) => JSON.stringify(s)).join(" or ")}?`
        : "";
    const which = operation === "list" ? "no API file or directory" : "no API file";
    throw new CodeModeError(
      "invalid_input",
      `API.${operation}(${JSON.stringify(value)}): there is ${which} at that path.${hint} API.list() shows every file.`,
      { operation, path: value, suggestions },
    );
  }

  return {
    list(prefix?: string): ApiFileInfo[] {
      let selected = sortedPaths;
      if (prefix !== undefined && prefix !== "") {
        const { normalized } = check("list", prefix);
        if (byPath.has(normalized)) selected = [normalized];
        else if (directories.has(normalized))
          selected = sortedPaths.filter((path) => path.startsWith(`${normalized}/`));
        else unknownPath("list", prefix, known);
      }
      return selected.map((path) => {
        const { description, bytes } = byPath.get(path)!;
        return { path, description, bytes };
      });
    },
    read(path: string): string {
      const { normalized } = check("read", path);
      const file = byPath.get(normalized);
      if (file) return file.content;
      if (directories.has(normalized)) {
        throw new CodeModeError(
          "invalid_input",
          `API.read(${JSON.stringify(path)}): that is a directory; API.list(${JSON.stringify(path)}) lists its files.`,
          { operation: "read", path },
        );
      }
      return unknownPath("read", path, sortedPaths);
    },
  };
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? JSON.stringify(value) : `a ${typeof value}`;
}
