import { constants, existsSync, type Stats } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readlink, realpath, stat, unlink } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { CodeModeError } from "@codecell/contract";
import { resolveWorkspacePath } from "./workspace-path.js";

const { O_RDONLY, O_WRONLY, O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** Symlinks followed (inside the workspace) before a path is refused as a loop, as the kernel does. */
const MAX_LINK_HOPS = 40;

/**
 * Linux exposes every open directory as `/proc/self/fd/<n>`: opening `<that>/<name>` resolves `name`
 * inside the directory the descriptor holds, whatever happened to its path since. That is `openat(2)`,
 * which Node does not offer, and it makes every step of a walk one check-and-open operation.
 */
const PROC_FD = existsSync("/proc/self/fd") ? "/proc/self/fd" : null;

export type OpenedFile = { handle: FileHandle; stats: Stats };

function fileSystemError(tool: string, path: string, error: unknown): CodeModeError {
  if (CodeModeError.is(error)) return error;
  const code = (error as NodeJS.ErrnoException).code;
  const why =
    code === "ENOENT"
      ? "does not exist in the workspace. List folders with list_dir"
      : code === "EACCES" || code === "EPERM"
        ? "cannot be opened: permission denied"
        : code === "ENOSPC" || code === "EDQUOT"
          ? "cannot be written: the disk is full"
          : code === "ENAMETOOLONG"
            ? "is too long a path"
            : code === "EROFS"
              ? "is on a read-only file system"
              : `cannot be used (${code ?? "unknown error"})`;
  return new CodeModeError("invalid_input", `${tool}: "${path}" ${why}.`, { path, errno: code ?? null });
}

function refuseOutside(tool: string, path: string): CodeModeError {
  return new CodeModeError(
    "invalid_input",
    `${tool}: "${path}" goes through a symbolic link that points outside the workspace; only files inside the workspace can be used. Pass a path relative to the workspace root.`,
    { path, reason: "outside_workspace" },
  );
}

function refuseSpecial(tool: string, path: string, stats: Stats): CodeModeError {
  const kind = stats.isFIFO()
    ? "a named pipe (FIFO)"
    : stats.isSocket()
      ? "a socket"
      : stats.isCharacterDevice() || stats.isBlockDevice()
        ? "a device"
        : "not a regular file";
  return new CodeModeError(
    "invalid_input",
    `${tool}: "${path}" is ${kind}; the file tools only read and write regular files.`,
    { path, reason: "not_regular_file" },
  );
}

/** Resolves `.` and `..` in path segments; null when they climb above the first segment. */
function normalizeParts(segments: readonly string[]): string[] | null {
  const parts: string[] = [];
  for (const segment of segments) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (parts.length === 0) return null;
      parts.pop();
    } else parts.push(segment);
  }
  return parts;
}

/**
 * The workspace as the core file tools see it. Every open walks from the workspace root one
 * component at a time, each opened relative to the directory held before it with no-follow semantics,
 * so a symlink swapped in by another process mid-call can never lead outside: a link met on the way is
 * read and followed only if its target stays inside, and the walk starts again from the root.
 */
export class WorkspaceFiles {
  readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  /** Path segments under the root for a tool's `path` argument, after the lexical checks. */
  #parts(path: unknown, tool: string): string[] {
    const target = resolveWorkspacePath(this.root, path, tool, { followLinks: false });
    return relative(this.root, target).split(sep).filter(Boolean);
  }

  /** Where a symlink found at `at` (segments under the root) points, as segments; null if outside. */
  #linkTarget(at: readonly string[], target: string): string[] | null {
    if (isAbsolute(target)) {
      const rel = relative(this.root, resolve(target));
      if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return null;
      return normalizeParts(rel.split(sep));
    }
    return normalizeParts([...at.slice(0, -1), ...target.split("/")]);
  }

  /**
   * Opens the directory holding the last segment (or, with `whole`, the path itself as a directory).
   * `create` makes missing folders on the way, each inside the directory held before it.
   */
  async #walk(
    parts: string[],
    tool: string,
    path: string,
    options: { whole: boolean; create: boolean },
  ): Promise<{ dir: FileHandle; name: string | null; parts: string[] }> {
    let pending = parts;
    let hops = 0;
    restart: for (;;) {
      let dir = await open(this.root, O_RDONLY | O_DIRECTORY);
      const done: string[] = [];
      try {
        while (pending.length > (options.whole ? 0 : 1)) {
          const part = pending[0]!;
          const at = `${PROC_FD}/${dir.fd}/${part}`;
          let next: FileHandle;
          try {
            next = await open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK);
          } catch (error) {
            const code = (error as NodeJS.ErrnoException).code;
            if (code === "ENOENT" && options.create) {
              await mkdir(at).catch((made: NodeJS.ErrnoException) => {
                if (made.code !== "EEXIST") throw fileSystemError(tool, path, made);
              });
              continue;
            }
            if (code !== "ENOTDIR" && code !== "ELOOP") throw fileSystemError(tool, path, error);
            const info = await lstat(at).catch(() => null);
            if (!info?.isSymbolicLink()) {
              throw new CodeModeError(
                "invalid_input",
                `${tool}: "${[...done, part].join("/")}" in "${path}" is a file, not a folder; use read_file for files.`,
              );
            }
            const target = this.#linkTarget([...done, part], await readlink(at));
            if (!target) throw refuseOutside(tool, path);
            if (++hops > MAX_LINK_HOPS) {
              throw new CodeModeError("invalid_input", `${tool}: "${path}" has too many symbolic links.`);
            }
            pending = [...target, ...pending.slice(1)];
            await dir.close();
            continue restart;
          }
          await dir.close();
          dir = next;
          done.push(part);
          pending = pending.slice(1);
        }
      } catch (error) {
        // The walk's own error is what the caller hears; a folder handle that fails to close (already
        // closed, descriptor broken) has nothing left to release.
        await dir.close().catch(() => {});
        throw error;
      }
      return { dir, name: pending[0] ?? null, parts: done };
    }
  }

  /** Opens a regular file for reading without following a link out or blocking on a FIFO. */
  async openForRead(path: unknown, tool: string): Promise<OpenedFile & { path: string }> {
    if (!PROC_FD) return this.#openVerified(path, tool);
    let parts = this.#parts(path, tool);
    const shown = String(path);
    for (let hops = 0; hops <= MAX_LINK_HOPS; hops++) {
      const {
        dir,
        name,
        parts: reached,
      } = await this.#walk(parts, tool, shown, {
        whole: false,
        create: false,
      });
      try {
        if (name === null) throw notAFile(tool, shown);
        const at = `${PROC_FD}/${dir.fd}/${name}`;
        let handle: FileHandle;
        try {
          handle = await open(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ELOOP") throw fileSystemError(tool, shown, error);
          const target = this.#linkTarget([...reached, name], await readlink(at));
          if (!target) throw refuseOutside(tool, shown);
          parts = target;
          continue;
        }
        return { ...(await checkRegular(handle, tool, shown)), path: [...reached, name].join("/") };
      } finally {
        // As above: a failed close leaves nothing to release.
        await dir.close().catch(() => {});
      }
    }
    throw new CodeModeError("invalid_input", `${tool}: "${shown}" has too many symbolic links.`);
  }

  /**
   * Opens (creating it and its folders if needed) a regular file for writing. Refused: a symbolic
   * link as the file itself, anything not a regular file, and a file with other hard links (one of
   * them may be outside the workspace). `admit` sees the opened file before anything is written; if
   * it throws, a file this call created is removed again.
   */
  async openForWrite(
    path: unknown,
    tool: string,
    admit: (stats: Stats) => Promise<void>,
  ): Promise<OpenedFile & { path: string }> {
    const shown = String(path);
    const parts = this.#parts(path, tool);
    if (parts.length === 0) throw new CodeModeError("invalid_input", `${tool}: "${shown}" is a folder.`);
    if (!PROC_FD) {
      const opened = await this.#openVerified(path, tool, true);
      await admit(opened.stats).catch(async (error) => {
        await opened.handle.close();
        throw error;
      });
      return opened;
    }
    const {
      dir,
      name,
      parts: reached,
    } = await this.#walk(parts, tool, shown, {
      whole: false,
      create: true,
    });
    try {
      const at = `${PROC_FD}/${dir.fd}/${name}`;
      const existed = await lstat(at).then(
        () => true,
        () => false,
      );
      let handle: FileHandle;
      try {
        handle = await open(at, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o666);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ELOOP") {
          throw new CodeModeError(
            "invalid_input",
            `${tool}: "${shown}" is a symbolic link; write to the real file instead.`,
          );
        }
        if (code === "EISDIR") throw new CodeModeError("invalid_input", `${tool}: "${shown}" is a folder.`);
        if (code === "ENXIO") {
          throw new CodeModeError(
            "invalid_input",
            `${tool}: "${shown}" is a named pipe (FIFO); the file tools only read and write regular files.`,
            { path: shown, reason: "not_regular_file" },
          );
        }
        throw fileSystemError(tool, shown, error);
      }
      const opened = await checkRegular(handle, tool, shown);
      if (opened.stats.nlink > 1) {
        await handle.close();
        throw new CodeModeError(
          "invalid_input",
          `${tool}: "${shown}" has ${opened.stats.nlink} hard links; write_file refuses files with other names, which may be outside the workspace. Delete it first or write a new file.`,
          { path: shown, reason: "hard_link" },
        );
      }
      try {
        await admit(opened.stats);
      } catch (error) {
        await handle.close();
        // The file this call just created goes again; if it cannot (gone already, or the folder changed),
        // the refusal is still what the caller hears, and the quota never counted it.
        if (!existed) await unlink(at).catch(() => {});
        throw error;
      }
      return { ...opened, path: [...reached, name].join("/") };
    } finally {
      // As above: a failed close leaves nothing to release.
      await dir.close().catch(() => {});
    }
  }

  /** Opens a workspace folder; `entryPath` names a child for lstat relative to the held descriptor. */
  async openDir(
    path: unknown,
    tool: string,
  ): Promise<{ path: string; location: string; entryPath(name: string): string; close(): Promise<void> }> {
    const shown = String(path);
    const parts = this.#parts(path, tool);
    if (!PROC_FD) {
      const target = resolveWorkspacePath(this.root, path, tool);
      return {
        path: parts.join("/") || ".",
        location: target,
        entryPath: (name) => `${target}/${name}`,
        close: async () => {},
      };
    }
    const { dir, parts: reached } = await this.#walk(parts, tool, shown, { whole: true, create: false });
    const location = `${PROC_FD}/${dir.fd}`;
    return {
      path: reached.join("/") || ".",
      location,
      entryPath: (name) => `${location}/${name}`,
      close: () => dir.close(),
    };
  }

  /**
   * Without `/proc/self/fd`: the lexical and real-path checks, an open that follows no link at the
   * end, then proof that the descriptor is the file found inside (same device and inode).
   */
  async #openVerified(path: unknown, tool: string, write = false): Promise<OpenedFile & { path: string }> {
    const shown = String(path);
    const target = resolveWorkspacePath(this.root, path, tool);
    let handle: FileHandle;
    try {
      handle = await open(target, (write ? O_WRONLY | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK, 0o666);
    } catch (error) {
      throw fileSystemError(tool, shown, error);
    }
    const opened = await checkRegular(handle, tool, shown);
    const real = await realpath(target).catch(() => null);
    const found = real ? await stat(real).catch(() => null) : null;
    const rel = real ? relative(this.root, real) : "..";
    if (
      !found ||
      rel.startsWith("..") ||
      isAbsolute(rel) ||
      found.dev !== opened.stats.dev ||
      found.ino !== opened.stats.ino ||
      (write && opened.stats.nlink > 1)
    ) {
      await handle.close();
      throw refuseOutside(tool, shown);
    }
    return { ...opened, path: rel.split(sep).join("/") };
  }
}

function notAFile(tool: string, path: string): CodeModeError {
  return new CodeModeError("invalid_input", `${tool}: "${path}" is not a file; use list_dir for folders.`);
}

async function checkRegular(handle: FileHandle, tool: string, path: string): Promise<OpenedFile> {
  const stats = await handle.stat();
  if (stats.isFile()) return { handle, stats };
  await handle.close();
  if (stats.isDirectory()) throw notAFile(tool, path);
  throw refuseSpecial(tool, path, stats);
}
