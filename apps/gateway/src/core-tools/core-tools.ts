import { spawn } from "node:child_process";
import { lstat, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import { resolveWorkspacePath, workspaceRelative } from "./workspace-path.js";

/** Core tools are catalogued as `core:codecell:<name>`. */
export const CORE_OWNER = "codecell";
/** The shell tool's id: hidden unless `tools.allow` names it exactly. */
export const SHELL_TOOL_ID = `core:${CORE_OWNER}:exec`;

const MAX_READ_BYTES = 1024 * 1024;
const MAX_WRITE_BYTES = 4 * 1024 * 1024;
const MAX_LIST_ENTRIES = 1000;
const MAX_SHELL_OUTPUT = 64 * 1024;

export type CoreToolContext = { signal: AbortSignal };
export type CoreTool = HostTool & { execute(input: JsonValue, context: CoreToolContext): Promise<unknown> };

function object(input: JsonValue, tool: string): Record<string, JsonValue> {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new CodeModeError(
      "invalid_input",
      `${tool} takes one object argument, such as { "path": "README.md" }.`,
    );
  }
  return input;
}

function notFound(tool: string, path: unknown): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `${tool}: "${String(path)}" does not exist in the workspace. List folders with list_dir.`,
  );
}

function fileTools(workspace: string): CoreTool[] {
  return [
    {
      name: "read_file",
      description: "Read a UTF-8 text file from the workspace.",
      parameters: {
        type: "object",
        properties: { path: { type: "string", description: "Path relative to the workspace" } },
        required: ["path"],
        additionalProperties: false,
      },
      source: "core",
      owner: CORE_OWNER,
      async execute(raw) {
        const input = object(raw, "read_file");
        const path = resolveWorkspacePath(workspace, input.path, "read_file");
        const info = await stat(path).catch(() => null);
        if (!info) throw notFound("read_file", input.path);
        if (!info.isFile())
          throw new CodeModeError(
            "invalid_input",
            `read_file: "${input.path}" is not a file; use list_dir for folders.`,
          );
        if (info.size > MAX_READ_BYTES) {
          throw new CodeModeError(
            "invalid_input",
            `read_file: "${input.path}" has ${info.size} bytes; the limit is ${MAX_READ_BYTES}.`,
          );
        }
        return {
          path: workspaceRelative(workspace, path),
          content: await readFile(path, "utf8"),
          bytes: info.size,
        };
      },
    },
    {
      name: "write_file",
      description:
        "Write a UTF-8 text file in the workspace (folders are created), replacing any existing one.",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string", description: "Path relative to the workspace" },
          content: { type: "string" },
        },
        required: ["path", "content"],
        additionalProperties: false,
      },
      source: "core",
      owner: CORE_OWNER,
      async execute(raw) {
        const input = object(raw, "write_file");
        const path = resolveWorkspacePath(workspace, input.path, "write_file");
        if (typeof input.content !== "string") {
          throw new CodeModeError("invalid_input", 'write_file needs "content": the text to write.');
        }
        const bytes = Buffer.byteLength(input.content);
        if (bytes > MAX_WRITE_BYTES) {
          throw new CodeModeError(
            "invalid_input",
            `write_file: content has ${bytes} bytes; the limit is ${MAX_WRITE_BYTES}.`,
          );
        }
        const existing = await lstat(path).catch(() => null);
        if (existing?.isSymbolicLink()) {
          throw new CodeModeError(
            "invalid_input",
            `write_file: "${input.path}" is a symbolic link; write to the real file instead.`,
          );
        }
        if (existing?.isDirectory())
          throw new CodeModeError("invalid_input", `write_file: "${input.path}" is a folder.`);
        await mkdir(dirname(path), { recursive: true });
        // Checked again after mkdir: the folders made must not have opened a way out.
        resolveWorkspacePath(workspace, input.path, "write_file");
        await writeFile(path, input.content, "utf8");
        return { path: workspaceRelative(workspace, path), bytes };
      },
    },
    {
      name: "list_dir",
      description: "List a workspace folder: names, kinds (file, dir, symlink) and file sizes.",
      parameters: {
        type: "object",
        properties: {
          path: {
            type: "string",
            description: 'Folder relative to the workspace; default "."',
            default: ".",
          },
        },
        additionalProperties: false,
      },
      source: "core",
      owner: CORE_OWNER,
      async execute(raw) {
        const input = object(raw ?? {}, "list_dir");
        const path = resolveWorkspacePath(workspace, input.path ?? ".", "list_dir");
        const entries = await readdir(path, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
          if (error.code === "ENOTDIR")
            throw new CodeModeError("invalid_input", `list_dir: "${input.path}" is a file; use read_file.`);
          throw notFound("list_dir", input.path ?? ".");
        });
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        const listed = [];
        for (const entry of entries.slice(0, MAX_LIST_ENTRIES)) {
          const kind = entry.isSymbolicLink()
            ? "symlink"
            : entry.isDirectory()
              ? "dir"
              : entry.isFile()
                ? "file"
                : "other";
          const size =
            kind === "file" ? (await stat(`${path}/${entry.name}`).catch(() => null))?.size : undefined;
          listed.push({ name: entry.name, kind, ...(size === undefined ? {} : { bytes: size }) });
        }
        return {
          path: workspaceRelative(workspace, path),
          entries: listed,
          truncated: entries.length > MAX_LIST_ENTRIES,
        };
      },
    },
  ];
}

function shellTool(workspace: string): CoreTool {
  return {
    name: "exec",
    description: "Run a shell command in the workspace folder and return its exit code, stdout and stderr.",
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", description: "A /bin/sh command line" },
        timeoutMs: { type: "integer", minimum: 1, maximum: 600000, default: 30000 },
      },
      required: ["command"],
      additionalProperties: false,
    },
    source: "core",
    owner: CORE_OWNER,
    execute(raw, { signal }) {
      const input = object(raw, "exec");
      if (typeof input.command !== "string" || input.command.trim() === "") {
        throw new CodeModeError("invalid_input", 'exec needs "command": a shell command line.');
      }
      const timeoutMs =
        typeof input.timeoutMs === "number" ? Math.min(Math.max(1, input.timeoutMs), 600_000) : 30_000;
      return new Promise((resolvePromise, reject) => {
        const child = spawn("/bin/sh", ["-c", input.command as string], {
          cwd: workspace,
          signal,
          timeout: timeoutMs,
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        const take = (current: string, chunk: Buffer) =>
          current.length >= MAX_SHELL_OUTPUT
            ? current
            : (current + chunk.toString("utf8")).slice(0, MAX_SHELL_OUTPUT);
        child.stdout.on("data", (chunk: Buffer) => {
          stdout = take(stdout, chunk);
        });
        child.stderr.on("data", (chunk: Buffer) => {
          stderr = take(stderr, chunk);
        });
        child.on("error", (error) => {
          if (signal.aborted) reject(new CodeModeError("aborted", "exec: the command was cancelled."));
          else
            reject(
              new CodeModeError("nested_tool_failed", `exec: could not run the command: ${error.message}`),
            );
        });
        child.on("close", (exitCode, killedBy) => {
          if (signal.aborted) return;
          resolvePromise({ exitCode, ...(killedBy ? { signal: killedBy } : {}), stdout, stderr });
        });
      });
    },
  };
}

/** The gateway's own tools. File tools exist only with a workspace; the shell tool is always listed. */
export function createCoreTools(workspace: string | null): CoreTool[] {
  if (!workspace) return [];
  return [...fileTools(workspace), shellTool(workspace)];
}
