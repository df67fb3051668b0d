import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createMcpConnector } from "../src/index.js";
import { stderrReason } from "../src/stderr-reason.js";

const scratch = mkdtempSync(join(tmpdir(), "codecell-stderr-reason-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Starts one stdio server that cannot start and returns the one start-up failure the connector reports. */
async function startFailure(args: string[]): Promise<string> {
  const connector = createMcpConnector(
    { broken: { command: process.execPath, args, cwd: scratch, connectTimeoutMs: 60_000 } },
    { clientName: "stderr-reason-test" },
  );
  try {
    await connector.start();
    expect(connector.diagnostics).toHaveLength(1);
    return connector.diagnostics[0]!.message;
  } finally {
    await connector.close();
  }
}

describe("a server that dies on start is reported in one line that says why", () => {
  it.each([
    ["a CommonJS script that is missing", "missing-server.js"],
    ["an ES module that is missing", "missing-server.mjs"],
  ])("%s: the line names the path, without the stack trace", async (_name, file) => {
    const path = join(scratch, file);
    const message = await startFailure([path]);
    expect(message).not.toContain("\n");
    expect(message).toMatch(/^MCP server "broken" failed to start: /);
    expect(message).toContain(`Cannot find module '${path}'`);
    expect(message).not.toMatch(/ at |Node\.js v|throw err/);
  });

  it("a server whose module throws on load: the error's own line", async () => {
    const path = join(scratch, "throws.mjs");
    writeFileSync(path, 'throw new TypeError("the port setting must be a number");\n');
    const message = await startFailure([path]);
    expect(message).not.toContain("\n");
    expect(message).toContain("TypeError: the port setting must be a number");
  });

  it("a server that writes one plain line and exits: that line", async () => {
    const path = join(scratch, "plain.mjs");
    writeFileSync(path, 'process.stderr.write("usage: plain <root folder>\\n"); process.exit(2);\n');
    expect(await startFailure([path])).toContain("(stderr: usage: plain <root folder>)");
  });
});

describe("stderrReason", () => {
  it("picks the line that names the error from other runtimes' crash output", () => {
    const python = [
      "Traceback (most recent call last):",
      '  File "/srv/server.py", line 3, in <module>',
      "    import mcp_thing",
      "ModuleNotFoundError: No module named 'mcp_thing'",
    ].join("\n");
    expect(stderrReason(python)).toBe("ModuleNotFoundError: No module named 'mcp_thing'");
    expect(stderrReason("python3: can't open file '/srv/x.py': [Errno 2] No such file or directory\n")).toBe(
      "python3: can't open file '/srv/x.py': [Errno 2] No such file or directory",
    );
    expect(stderrReason("")).toBe("");
    expect(stderrReason(`Error: ${"x".repeat(5000)}`).length).toBeLessThanOrEqual(403);
  });
});
