import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { setMaxListeners } from "node:events";
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodeModeError } from "@codecell/contract";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type CoreTool, createCoreTools } from "../../src/core-tools/core-tools.js";

let root: string;
let workspace: string;
let outside: string;
const signal = new AbortController().signal;
// One signal for 600 racing calls, each waiting its turn at the file gate with an abort listener (a real
// nested call has a signal of its own): more listeners than Node's leak warning expects, on purpose.
setMaxListeners(1_000, signal);

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), "codecell-wsf-")));
  workspace = join(root, "ws");
  outside = join(root, "outside");
  mkdirSync(join(workspace, "real"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(workspace, "real", "f.txt"), "inside");
  writeFileSync(join(workspace, "inside.txt"), "inside");
  writeFileSync(join(outside, "f.txt"), "outside");
  writeFileSync(join(outside, "secret.txt"), "outside");
});

let swapper: ChildProcess | null = null;
afterEach(() => {
  swapper?.kill("SIGKILL");
  swapper = null;
});

function tools(limits?: Parameters<typeof createCoreTools>[1]): (name: string) => CoreTool {
  const created = createCoreTools(workspace, limits);
  return (name) => created.find((tool) => tool.name === name)!;
}

async function failure(promise: Promise<unknown>): Promise<CodeModeError> {
  try {
    await promise;
  } catch (error) {
    expect(CodeModeError.is(error), String(error)).toBe(true);
    return error as CodeModeError;
  }
  throw new Error("expected the call to fail");
}

/**
 * Another local process that keeps swapping links under the workspace, as fast as it can, until it
 * is killed: `dir` between the inside folder and the outside one, and `file.txt` between a regular
 * file, a link to an inside file and a link to an outside file.
 */
function startSwapper(): Promise<void> {
  const script = `
    const fs = require("node:fs");
    const [ws, out] = process.argv.slice(1);
    const swap = (name, make) => { const tmp = ws + "/." + name + ".tmp"; fs.rmSync(tmp, { force: true }); make(tmp); fs.renameSync(tmp, ws + "/" + name); };
    let i = 0;
    process.stdout.write("ready\\n");
    for (;;) {
      i++;
      swap("dir", (tmp) => fs.symlinkSync(i % 2 ? out : "real", tmp));
      swap("wdir", (tmp) => fs.symlinkSync(i % 2 ? out : "real", tmp));
      swap("file.txt", (tmp) => {
        if (i % 3 === 0) fs.writeFileSync(tmp, "inside");
        else fs.symlinkSync(i % 3 === 1 ? out + "/secret.txt" : "inside.txt", tmp);
      });
    }`;
  swapper = spawn(process.execPath, ["-e", script, workspace, outside], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolveReady) => swapper!.stdout!.once("data", () => resolveReady()));
}

describe("file tools against a process racing symlinks", () => {
  it("never reads or writes outside the workspace while links are swapped (bounded: 300 each)", async () => {
    const tool = tools();
    await startSwapper();
    const reads: Array<Promise<unknown>> = [];
    const writes: Array<Promise<unknown>> = [];
    for (let i = 0; i < 300; i++) {
      reads.push(tool("read_file").execute({ path: i % 2 ? "dir/f.txt" : "file.txt" }, { signal }));
      writes.push(
        tool("write_file").execute(
          { path: i % 2 ? "wdir/f.txt" : i % 4 ? "file.txt" : `wdir/new-${i}.txt`, content: "written" },
          { signal },
        ),
      );
    }
    const settled = Promise.all([Promise.allSettled(reads), Promise.allSettled(writes)]);
    const [readResults] = await settled;
    swapper?.kill("SIGKILL");

    const contents = readResults.flatMap((result) =>
      result.status === "fulfilled" ? [(result.value as { content: string }).content] : [],
    );
    expect(contents.filter((content) => content === "outside")).toEqual([]);
    for (const result of readResults) {
      if (result.status === "rejected") expect(CodeModeError.is(result.reason)).toBe(true);
    }
    // Nothing outside was changed or created.
    expect(readFileSync(join(outside, "f.txt"), "utf8")).toBe("outside");
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("outside");
    expect(execFileSync("ls", [outside], { encoding: "utf8" }).trim().split("\n")).toEqual([
      "f.txt",
      "secret.txt",
    ]);
  }, 60_000);

  it("follows links that stay inside and refuses the ones that point out", async () => {
    const tool = tools();
    symlinkSync("real", join(workspace, "in-link"));
    symlinkSync(outside, join(workspace, "out-link"));
    symlinkSync(join(workspace, "real", "f.txt"), join(workspace, "abs-in.txt"));
    symlinkSync("../outside/secret.txt", join(workspace, "rel-out.txt"));
    await expect(tool("read_file").execute({ path: "in-link/f.txt" }, { signal })).resolves.toMatchObject({
      content: "inside",
      path: "real/f.txt",
    });
    await expect(tool("read_file").execute({ path: "abs-in.txt" }, { signal })).resolves.toMatchObject({
      content: "inside",
    });
    for (const path of ["out-link/f.txt", "rel-out.txt"]) {
      const error = await failure(tool("read_file").execute({ path }, { signal }));
      expect(error.message).toMatch(/symbolic link that points outside/);
    }
    const error = await failure(
      tool("write_file").execute({ path: "out-link/new.txt", content: "x" }, { signal }),
    );
    expect(error.message).toMatch(/symbolic link that points outside/);
    expect(existsSync(join(outside, "new.txt"))).toBe(false);
  });

  it("refuses to write through a hard link to a file outside", async () => {
    const tool = tools();
    linkSync(join(outside, "secret.txt"), join(workspace, "hard.txt"));
    const error = await failure(
      tool("write_file").execute({ path: "hard.txt", content: "pwned" }, { signal }),
    );
    expect(error.message).toMatch(/hard links/);
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("outside");
  });
});

describe("file tools on special files", () => {
  it("refuses a FIFO at once, without holding the thread pool, while other reads go on", async () => {
    const tool = tools();
    execFileSync("mkfifo", [join(workspace, "pipe")]);
    // More blocked opens than libuv has threads (4): before, these hung every thread for good.
    const attempts = [
      ...Array.from({ length: 6 }, () =>
        tool("write_file").execute({ path: "pipe", content: "x" }, { signal }),
      ),
      ...Array.from({ length: 2 }, () => tool("read_file").execute({ path: "pipe" }, { signal })),
    ];
    for (const error of await Promise.all(attempts.map(failure))) {
      expect(error.code).toBe("invalid_input");
      expect(error.message).toMatch(/named pipe \(FIFO\); the file tools only read and write regular files/);
    }
    await expect(tool("read_file").execute({ path: "inside.txt" }, { signal })).resolves.toMatchObject({
      content: "inside",
    });
    const listed = (await tool("list_dir").execute({}, { signal })) as { entries: unknown[] };
    expect(listed.entries).toContainEqual({ name: "pipe", kind: "other" });
  }, 10_000);

  it("refuses a device reached through a link inside the workspace", async () => {
    const tool = tools();
    symlinkSync("/dev/zero", join(workspace, "zero"));
    const error = await failure(tool("read_file").execute({ path: "zero" }, { signal }));
    expect(error.message).toMatch(/outside the workspace/);
  });
});

describe("workspace quota and per-run write budget", () => {
  it("refuses a write past the run's budget, naming the limit and the config field", async () => {
    const tool = tools({ maxBytes: 10_000, maxWriteBytesPerRun: 600 });
    const write = (path: string, bytes: number, runKey?: string) =>
      tool("write_file").execute(
        { path, content: "x".repeat(bytes) },
        { signal, ...(runKey ? { runKey } : {}) },
      );
    await write("a.txt", 500, "run-1");
    const error = await failure(write("b.txt", 200, "run-1"));
    expect(error.code).toBe("nested_tool_failed");
    expect(error.message).toMatch(/write budget of 600 bytes .*workspace\.maxWriteBytesPerRun/);
    expect(existsSync(join(workspace, "b.txt"))).toBe(false); // refused before it was created for good
    await expect(write("b.txt", 200, "run-2")).resolves.toEqual({ path: "b.txt", bytes: 200 });
  });

  it("refuses a write that would grow the workspace past its quota; replacing a file counts the difference", async () => {
    // The workspace holds 12 bytes already ("inside" twice).
    const tool = tools({ maxBytes: 1_012, maxWriteBytesPerRun: 1_000_000 });
    const write = (path: string, bytes: number) =>
      tool("write_file").execute({ path, content: "y".repeat(bytes) }, { signal });
    await write("big.txt", 900);
    const error = await failure(write("more.txt", 200));
    expect(error.message).toMatch(/over its quota of .*workspace\.maxBytes/);
    expect(error.details).toMatchObject({ limit: "workspace.maxBytes" });
    // Shrinking a file makes room again.
    await write("big.txt", 100);
    await expect(write("more.txt", 200)).resolves.toMatchObject({ bytes: 200 });
  });
});

describe("error messages", () => {
  it("name workspace-relative paths only, never the host's", async () => {
    const tool = tools();
    symlinkSync("loop", join(workspace, "loop"));
    symlinkSync(join(outside, "missing"), join(workspace, "danglingdir"));
    writeFileSync(join(workspace, "plain"), "x");
    const attempts = [
      tool("write_file").execute({ path: "loop/x.txt", content: "x" }, { signal }),
      tool("write_file").execute({ path: "danglingdir/x.txt", content: "x" }, { signal }),
      tool("write_file").execute({ path: "plain/x.txt", content: "x" }, { signal }),
      tool("read_file").execute({ path: "danglingdir" }, { signal }),
      tool("read_file").execute({ path: "real" }, { signal }),
      tool("list_dir").execute({ path: "plain" }, { signal }),
      tool("list_dir").execute({ path: "nope/deeper" }, { signal }),
      tool("read_file").execute({ path: "real/../../ws/../outside/f.txt" }, { signal }),
    ];
    for (const error of await Promise.all(attempts.map(failure))) {
      expect(error.message).not.toContain(root);
      expect(error.message).not.toContain(tmpdir());
      expect(JSON.stringify(error.details ?? {})).not.toContain(root);
    }
  });
});
