import { type FileHandle, lstat, readdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import { WorkspaceFiles } from "./workspace-files.js";
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits, WorkspaceQuota } from "./workspace-quota.js";

/** Core tools are catalogued as `core:codecell:<name>`. */
export const CORE_OWNER = "codecell";
/** The shell tool's id: hidden unless `tools.allow` names it exactly. */
export const SHELL_TOOL_ID = `core:${CORE_OWNER}:exec`;

const MAX_READ_BYTES = 1024 * 1024;
const MAX_WRITE_BYTES = 4 * 1024 * 1024;
const MAX_LIST_ENTRIES = 1000;
const MAX_SHELL_OUTPUT = 64 * 1024;

export type CoreToolContext = {
  signal: AbortSignal;
  /** The code-mode run this call belongs to, for the per-run write budget; absent: the call alone. */
  runKey?: string;
};
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

/**
 * At most this many file-tool operations use libuv's thread pool at once (4 threads by default), so
 * a flood of file calls from one cell leaves threads for everything else the gateway does (DNS, zlib,
 * crypto, other sessions' reads). Every operation is bounded: opens never block (O_NONBLOCK, regular
 * files only) and reads and writes have size limits.
 */
const MAX_CONCURRENT_FILE_OPS = 2;

/** A small FIFO semaphore for the file tools' thread-pool work. */
class FileIoGate {
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  async run<T>(work: () => Promise<T>, signal: AbortSignal): Promise<T> {
    if (this.#active >= MAX_CONCURRENT_FILE_OPS) {
      await new Promise<void>((resolveTurn, reject) => {
        const turn = () => {
          signal.removeEventListener("abort", onAbort);
          resolveTurn();
        };
        const onAbort = () => {
          const index = this.#waiting.indexOf(turn);
          if (index >= 0) this.#waiting.splice(index, 1);
          reject(new CodeModeError("aborted", "The file operation was cancelled before it started."));
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        this.#waiting.push(turn);
      });
    } else this.#active++;
    try {
      // Cancelled while it waited for its turn, or between the cell's call and now: touch nothing.
      if (signal.aborted)
        throw new CodeModeError("aborted", "The file operation was cancelled before it started.");
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#active--;
    }
  }
}

/** Host paths never reach the guest: the workspace root becomes ".", other absolute paths "<host path>". */
export function withoutHostPaths(message: string, workspace: string): string {
  return message
    .split(`${workspace}/`)
    .join("")
    .split(workspace)
    .join(".")
    .replace(/(^|[\s'(=])\/(?:[^\s'"),:]+\/?)+/g, "$1<host path>");
}

/** Any error a core tool throws, as the guest may see it: a CodeModeError without host paths. */
function guestError(error: unknown, tool: string, workspace: string): CodeModeError {
  if (CodeModeError.is(error)) {
    const message = withoutHostPaths(error.message, workspace);
    return message === error.message
      ? error
      : new CodeModeError(error.code, message, error.details, { cause: error });
  }
  return new CodeModeError(
    "nested_tool_failed",
    `${tool}: ${withoutHostPaths((error as Error)?.message ?? String(error), workspace)}`,
  );
}

async function readBounded(handle: FileHandle, limit: number): Promise<Buffer | null> {
  // One byte past the limit tells a file that grew since fstat from one that did not.
  const buffer = Buffer.alloc(limit + 1);
  let filled = 0;
  for (;;) {
    const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
    if (filled > limit) return null;
  }
  return buffer.subarray(0, filled);
}

function fileTools(workspace: string, limits: WorkspaceLimits): CoreTool[] {
  const files = new WorkspaceFiles(workspace);
  const quota = new WorkspaceQuota(workspace, limits);
  const gate = new FileIoGate();
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
      async execute(raw, { signal }) {
        const input = object(raw, "read_file");
        return gate.run(async () => {
          const opened = await files.openForRead(input.path, "read_file");
          try {
            const tooLarge = () =>
              new CodeModeError(
                "invalid_input",
                `read_file: "${input.path}" has more than ${MAX_READ_BYTES} bytes; the limit is ${MAX_READ_BYTES}.`,
              );
            if (opened.stats.size > MAX_READ_BYTES) throw tooLarge();
            const content = await readBounded(opened.handle, MAX_READ_BYTES);
            if (!content) throw tooLarge();
            return { path: opened.path, content: content.toString("utf8"), bytes: content.length };
          } finally {
            // Closing a handle fails only if it is already closed or its descriptor broke: the tool's
            // answer (or its error) is what counts, and there is nothing left to release.
            await opened.handle.close().catch(() => {});
          }
        }, signal);
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
      async execute(raw, { signal, runKey }) {
        const input = object(raw, "write_file");
        if (typeof input.content !== "string") {
          throw new CodeModeError("invalid_input", 'write_file needs "content": the text to write.');
        }
        const content = input.content;
        const bytes = Buffer.byteLength(content);
        if (bytes > MAX_WRITE_BYTES) {
          throw new CodeModeError(
            "invalid_input",
            `write_file: content has ${bytes} bytes; the limit is ${MAX_WRITE_BYTES}.`,
          );
        }
        return gate.run(async () => {
          let replacing = 0;
          const opened = await files.openForWrite(input.path, "write_file", async (stats) => {
            replacing = stats.size;
            await quota.reserve("write_file", String(input.path), bytes, replacing, runKey);
          });
          try {
            await opened.handle.truncate(0);
            await opened.handle.write(content, 0, "utf8");
          } catch (error) {
            quota.release(bytes, replacing, runKey);
            throw error;
          } finally {
            // As in read_file: a failed close leaves nothing to release.
            await opened.handle.close().catch(() => {});
          }
          return { path: opened.path, bytes };
        }, signal);
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
      async execute(raw, { signal }) {
        const input = object(raw ?? {}, "list_dir");
        return gate.run(async () => {
          const folder = await files.openDir(input.path ?? ".", "list_dir");
          try {
            const entries = await readdir(folder.location, { withFileTypes: true });
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
                kind === "file"
                  ? (await lstat(folder.entryPath(entry.name)).catch(() => null))?.size
                  : undefined;
              listed.push({ name: entry.name, kind, ...(size === undefined ? {} : { bytes: size }) });
            }
            return { path: folder.path, entries: listed, truncated: entries.length > MAX_LIST_ENTRIES };
          } finally {
            // As in read_file: a failed close leaves nothing to release.
            await folder.close().catch(() => {});
          }
        }, signal);
      },
    },
  ];
}

/**
 * node:child_process, loaded with the first shell command: it (and the dgram module it loads) is a few
 * milliseconds of every `codecell serve` start-up that runs no command.
 */
let childProcessModule: typeof import("node:child_process") | undefined;
function childProcess(): typeof import("node:child_process") {
  childProcessModule ??= createRequire(import.meta.url)(
    "node:child_process",
  ) as typeof import("node:child_process");
  return childProcessModule;
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
        const child = childProcess().spawn("/bin/sh", ["-c", input.command as string], {
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

/**
 * The gateway's own tools. File tools exist only with a workspace; the shell tool is always listed.
 * Whatever a tool throws reaches the guest as a CodeModeError with workspace-relative paths only.
 */
export function createCoreTools(
  workspace: string | null,
  limits: WorkspaceLimits = DEFAULT_WORKSPACE_LIMITS,
): CoreTool[] {
  if (!workspace) return [];
  return [...fileTools(workspace, limits), shellTool(workspace)].map((tool) => ({
    ...tool,
    async execute(input, context) {
      try {
        return await tool.execute(input, context);
      } catch (error) {
        throw guestError(error, tool.name, workspace);
      }
    },
  }));
}
