import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodeModeError } from "@codecell/contract";
import { beforeAll, describe, expect, it } from "vitest";
import { createCoreTools } from "../../src/core-tools/core-tools.js";
import { resolveWorkspacePath } from "../../src/core-tools/workspace-path.js";

let root: string;
let workspace: string;

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), "codecell-ws-")));
  workspace = join(root, "ws");
  mkdirSync(join(workspace, "sub"), { recursive: true });
  writeFileSync(join(workspace, "sub", "a.txt"), "inside");
  writeFileSync(join(root, "secret.txt"), "outside");
  symlinkSync(root, join(workspace, "up"));
  symlinkSync(join(workspace, "sub"), join(workspace, "sub-link"));
  symlinkSync(join(root, "secret.txt"), join(workspace, "secret-link.txt"));
});

describe("resolveWorkspacePath", () => {
  const allowed: Array<[string, string]> = [
    ["a relative file", "sub/a.txt"],
    ["the root", "."],
    ["a file that does not exist yet", "new/deeper/file.txt"],
    ["a .. that stays inside", "sub/../sub/a.txt"],
    ["a symlink that stays inside", "sub-link/a.txt"],
  ];
  it.each(allowed)("allows %s", (_label, path) => {
    expect(resolveWorkspacePath(workspace, path, "t").startsWith(workspace)).toBe(true);
  });

  it("allows an absolute path inside the workspace", () => {
    expect(resolveWorkspacePath(workspace, join(workspace, "sub", "a.txt"), "t")).toBe(
      join(workspace, "sub", "a.txt"),
    );
  });

  const refused: Array<[string, unknown, RegExp]> = [
    ["a climb out", "../secret.txt", /climbs out/],
    ["a deep climb out", "sub/../../secret.txt", /climbs out/],
    ["an absolute path outside", "/etc/passwd", /absolute path outside/],
    ["a symlinked folder out", "up/secret.txt", /symbolic link/],
    ["a symlinked file out", "secret-link.txt", /symbolic link/],
    ["a new file under a link out", "up/new.txt", /symbolic link/],
    ["an empty path", "", /needs "path"/],
    ["a number", 3, /needs "path"/],
    ["a NUL byte", "a\0b", /NUL/],
  ];
  it.each(refused)("refuses %s", (_label, path, message) => {
    let caught: unknown;
    try {
      resolveWorkspacePath(workspace, path, "read_file");
    } catch (error) {
      caught = error;
    }
    expect(CodeModeError.is(caught)).toBe(true);
    expect((caught as CodeModeError).code).toBe("invalid_input");
    expect((caught as Error).message).toMatch(message);
  });
});

describe("core tools", () => {
  const signal = new AbortController().signal;
  const tool = (name: string) => createCoreTools(workspace).find((candidate) => candidate.name === name)!;

  it("writes, reads and lists inside the workspace", async () => {
    await expect(
      tool("write_file").execute({ path: "out/note.md", content: "héllo" }, { signal }),
    ).resolves.toEqual({
      path: "out/note.md",
      bytes: 6,
    });
    await expect(tool("read_file").execute({ path: "out/note.md" }, { signal })).resolves.toMatchObject({
      content: "héllo",
    });
    const listed = (await tool("list_dir").execute({ path: "." }, { signal })) as {
      entries: Array<{ name: string; kind: string }>;
    };
    expect(listed.entries).toEqual(
      expect.arrayContaining([
        { name: "out", kind: "dir" },
        { name: "up", kind: "symlink" },
      ]),
    );
  });

  it("refuses to write through a symlink or read a folder", async () => {
    await expect(
      tool("write_file").execute({ path: "secret-link.txt", content: "x" }, { signal }),
    ).rejects.toThrow(/symbolic link/);
    await expect(tool("read_file").execute({ path: "sub" }, { signal })).rejects.toThrow(/not a file/);
    await expect(tool("read_file").execute({ path: "nope.txt" }, { signal })).rejects.toThrow(
      /does not exist/,
    );
  });

  it("runs the shell in the workspace and reports the exit code", async () => {
    const result = await tool("exec").execute({ command: "pwd; exit 3" }, { signal });
    expect(result).toEqual({ exitCode: 3, stdout: `${workspace}\n`, stderr: "" });
  });

  it("has no tools without a workspace", () => {
    expect(createCoreTools(null)).toEqual([]);
  });
});
