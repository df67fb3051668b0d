import { existsSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APP_DIR, baseConfig, makeSetup, runCli } from "./harness.js";

/** A config whose one downstream server leaves a file behind the moment it is started. */
function configThatMarksStartup(): { configPath: string; marker: string } {
  const setup = makeSetup({});
  const marker = join(setup.dir, "downstream-started");
  writeFileSync(
    setup.configPath,
    JSON.stringify(
      baseConfig({
        mcpServers: {
          marker: {
            command: process.execPath,
            args: ["-e", `require("fs").writeFileSync(${JSON.stringify(marker)}, "started")`],
          },
        },
      }),
    ),
  );
  return { configPath: setup.configPath, marker };
}

describe("codecell serve --http on a port that is taken", () => {
  let blocker: Server;
  let port: number;
  beforeAll(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    port = (blocker.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

  it("says so in one line naming the port and what to do, exits 6, and starts no downstream server", async () => {
    const { configPath, marker } = configThatMarksStartup();
    const { code, stdout, stderr } = await runCli(["serve", "--config", configPath, "--http", String(port)]);
    expect(code).toBe(6);
    expect(stdout).toBe("");
    expect(stderr).toBe(
      `codecell: port ${port} on 127.0.0.1 is already in use (another codecell, or another program). Stop that program, or serve on another port: codecell serve --http ${port + 1} (npm start -- --http ${port + 1}), or --http 0 for any free port.\n`,
    );
    expect(existsSync(marker)).toBe(false);
  });
});

describe("an unexpected error", () => {
  // A plugin whose timer throws after startup: nothing in codecell expects that.
  function configWithBrokenPlugin(): string {
    const setup = makeSetup(baseConfig({ mcpServers: {}, plugins: ["./broken-timer.mjs"] }));
    writeFileSync(
      join(setup.dir, "broken-timer.mjs"),
      `export default { id: "broken", tools: [] };
       setTimeout(() => { throw new Error("the plugin's timer broke"); }, 200);`,
    );
    return setup.configPath;
  }

  it("is one line without a stack trace", async () => {
    const { code, stderr } = await runCli(["serve", "--config", configWithBrokenPlugin(), "--http", "0"], {
      env: { CODECELL_DEBUG_CODE_MODE: "" },
    });
    expect(code).toBe(1);
    const last = stderr.trim().split("\n").at(-1);
    expect(last).toBe(
      "codecell: unexpected error: the plugin's timer broke (run again with CODECELL_DEBUG_CODE_MODE=1 to see where it happened)",
    );
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  it("shows its stack trace with CODECELL_DEBUG_CODE_MODE=1", async () => {
    const { code, stderr } = await runCli(["serve", "--config", configWithBrokenPlugin(), "--http", "0"], {
      env: { CODECELL_DEBUG_CODE_MODE: "1" },
    });
    expect(code).toBe(1);
    expect(stderr).toMatch(/unexpected error: Error: the plugin's timer broke\n\s+at /);
  });
});

describe("codecell check on a config with errors and clamped limits", () => {
  it("prints the clamping warning alongside the errors, one line each", async () => {
    const setup = makeSetup({});
    writeFileSync(setup.configPath, `{ tools: { codeMode: { enabled: true, timeoutMs: 5 } }, workspace: 3 }`);
    const { code, stdout, stderr } = await runCli(["check", "--config", setup.configPath]);
    expect(code).toBe(3);
    expect(stdout).toBe("");
    expect(stderr.split("\n")).toEqual([
      `${setup.configPath}: workspace: got 3: that is a whole number, which is none of the accepted forms. Expected a folder path, relative to the config file, that the core file tools may touch, or { "path": "...", "maxBytes": 1073741824, "maxWriteBytesPerRun": 67108864 }.`,
      `codecell: warning: ${setup.configPath}: tools.codeMode.timeoutMs: 5 is outside its range; using 100.`,
      "codecell: 1 problem in the config; nothing was started.",
      "",
    ]);
  });
});

describe("codecell output meant for pipes", () => {
  it("npx codecell from the clone prints only the result JSON on stdout", async () => {
    const root = join(APP_DIR, "..", "..");
    const { spawnSync } = await import("node:child_process");
    const result = spawnSync("npx", ["--no", "codecell", "exec", "-"], {
      cwd: root,
      input: "return 6 * 7;",
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(result.status, result.stderr).toBe(0);
    // The whole of stdout parses: no package-manager banner before or after the JSON.
    expect(JSON.parse(result.stdout)).toMatchObject({ status: "completed", value: 42 });
  });
});
