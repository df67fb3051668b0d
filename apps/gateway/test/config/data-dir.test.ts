import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { userDataDir } from "../../src/config/data-dir.js";
import { DEFAULT_CONFIG_FILE, loadGatewayConfig } from "../../src/config/load-config.js";

describe("the per-user data folder", () => {
  it("follows CODECELL_DATA_DIR, then XDG_DATA_HOME, then the platform's default", () => {
    expect(userDataDir({ CODECELL_DATA_DIR: "/srv/cc", XDG_DATA_HOME: "/x" }, "linux")).toBe("/srv/cc");
    expect(userDataDir({ XDG_DATA_HOME: "/home/u/data" }, "linux")).toBe("/home/u/data/codecell");
    expect(userDataDir({ XDG_DATA_HOME: "relative/ignored" }, "linux")).toBe(
      join(homedir(), ".local", "share", "codecell"),
    );
    expect(userDataDir({}, "darwin")).toBe(join(homedir(), "Library", "Application Support", "codecell"));
    expect(userDataDir({ LOCALAPPDATA: "C:\\Users\\u\\AppData\\Local" }, "win32")).toBe(
      join("C:\\Users\\u\\AppData\\Local", "codecell"),
    );
  });

  it("holds the embedded default's memory graph, never a fixed file in /tmp", () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "codecell-data-")), "nested", "codecell");
    const { config, problems } = loadGatewayConfig(DEFAULT_CONFIG_FILE, { CODECELL_DATA_DIR: dataDir });
    expect(problems).toEqual([]);
    expect(config?.mcpServers.memory).toMatchObject({
      env: { MEMORY_FILE_PATH: join(dataDir, "memory.jsonl") },
    });
    // Made before the server starts, so the server can write its file there.
    expect(existsSync(dataDir)).toBe(true);
  });

  it("says in one line when the data folder cannot be made", () => {
    const blocker = join(mkdtempSync(join(tmpdir(), "codecell-data-")), "a-file");
    writeFileSync(blocker, "");
    const { problems } = loadGatewayConfig(DEFAULT_CONFIG_FILE, { CODECELL_DATA_DIR: join(blocker, "sub") });
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toBe(
      `cannot create the data folder ${join(blocker, "sub")} (ENOTDIR). Set CODECELL_DATA_DIR to a folder you can write.`,
    );
  });
});
