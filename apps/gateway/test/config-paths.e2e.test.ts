import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { APP_DIR, runCli } from "./harness.js";

// "Paths are relative to the config file": a server's `./` and `../` args (and command) resolve against
// the config file's folder, or the entry's own `cwd`, never the folder the command was started in.

const SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");

/** A folder with `conf/` (the config) and the command's working folder `elsewhere/`, apart from it. */
function layout(mcpServers: Record<string, unknown>): { root: string; config: string; elsewhere: string } {
  const root = mkdtempSync(join(tmpdir(), "codecell-paths-"));
  mkdirSync(join(root, "conf", "servers"), { recursive: true });
  mkdirSync(join(root, "servers"));
  mkdirSync(join(root, "elsewhere"));
  // The README's shape: a CommonJS my-server.js beside the config (it starts a real MCP server).
  const server = `import(${JSON.stringify(pathToFileURL(SERVER).href)});\n`;
  writeFileSync(join(root, "conf", "my-server.js"), server);
  writeFileSync(join(root, "conf", "servers", "in-cwd.js"), server);
  writeFileSync(join(root, "servers", "up.js"), server);
  const config = join(root, "conf", "my.json5");
  writeFileSync(config, JSON.stringify({ tools: { codeMode: true }, mcpServers }, null, 2));
  return { root, config, elsewhere: join(root, "elsewhere") };
}

const servers = (stdout: string) =>
  (JSON.parse(stdout) as { mcpServers: Array<{ name: string; tools: string[] }> }).mcpServers;

describe("mcpServers paths, from a command started in another folder", () => {
  it("resolves ./ against the config file's folder, ../ above it, and ./ against an entry's cwd", async () => {
    const { config, elsewhere } = layout({
      mine: { command: "node", args: ["./my-server.js"] },
      up: { command: "node", args: ["../servers/up.js"] },
      cwd: { command: "node", args: ["./in-cwd.js"], cwd: "./servers" },
    });
    const checked = await runCli(["check", "--connect", "--config", config], { cwd: elsewhere });
    expect(checked.stderr).toBe("");
    expect(checked.code).toBe(0);
    const listed = await runCli(["catalog", "--config", config], { cwd: elsewhere });
    expect(listed.code, listed.stderr).toBe(0);
    expect(servers(listed.stdout)).toEqual([
      { name: "mine", call: "MCP.mine", tools: ["MCP.mine.waitLong"] },
      { name: "up", call: "MCP.up", tools: ["MCP.up.waitLong"] },
      { name: "cwd", call: "MCP.cwd", tools: ["MCP.cwd.waitLong"] },
    ]);
  });

  it.each([
    ["./missing.js", ["conf", "missing.js"]],
    ["../nowhere/missing.mjs", ["nowhere", "missing.mjs"]],
  ])("refuses a missing script %s in one line naming its absolute path", async (arg, parts) => {
    const { root, config, elsewhere } = layout({ mine: { command: "node", args: [arg] } });
    const path = join(root, ...parts);
    for (const command of [["check"], ["check", "--connect"], ["exec", "-e", "return 1"]]) {
      const result = await runCli([...command, "--config", config], { cwd: elsewhere });
      expect(result.code, result.stderr).toBe(3);
      const lines = result.stderr.trim().split("\n");
      expect(lines).toEqual([
        `${config}: mcpServers.mine.args.0: no such file ${path} (a path that starts with ./ or ../ is relative to the config file's folder, ${join(root, "conf")}). Fix the path or create the file.`,
        "codecell: 1 problem in the config; nothing was started.",
      ]);
    }
  });

  it("reports a server that cannot load its module once, in one line naming the path", async () => {
    // Past the first argument, so no load-time check sees it: the server itself fails on start.
    const { root, config, elsewhere } = layout({
      mine: { command: "node", args: ["--no-warnings", "./gone.js"] },
    });
    const result = await runCli(["check", "--connect", "--config", config], { cwd: elsewhere });
    expect(result.code).toBe(3);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/: mcpServers\.mine: MCP server "mine" failed to start: /);
    expect(lines[0]).toContain(`Cannot find module '${join(root, "conf", "gone.js")}'`);
    expect(lines[1]).toBe("codecell: 1 MCP server failed to start.");
  });
});
