import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { describe, expect, it } from "vitest";
import { APP_DIR } from "./harness.js";

// The promise tested here: "a test packs every package, installs the tarballs into an empty folder with npm, and
// runs `npx codecell exec` and `npx codecell serve` from there." The packages are packed with pnpm, which
// rewrites `workspace:` ranges to versions as `pnpm publish` does. npm installs the third-party
// dependencies from the registry (from its cache when warm). Install scripts are skipped: the one that
// matters, better-sqlite3's, compiles from source for minutes when no prebuilt binary can be fetched,
// and the embedded default (memory store) does not load it.

const run = promisify(execFile);
const ROOT = resolve(APP_DIR, "..", "..");

/**
 * The pack command docs/operating.md gives a reader ("Installing without cloning"), as npx arguments with
 * its destination replaced: the test runs the route the page shows, so the page cannot drift from it.
 */
function documentedPackArgs(destination: string): string[] {
  const page = readFileSync(join(ROOT, "docs", "operating.md"), "utf8");
  const section = page.slice(page.indexOf("## Installing without cloning"));
  const line = section.split("\n").find((text) => /^npx pnpm@\S+ .* pack /.test(text));
  if (!line)
    throw new Error('docs/operating.md "Installing without cloning" shows no `npx pnpm@... pack` line');
  const words = line.split(/\s+/).map((word) => word.replace(/^"(.*)"$/, "$1"));
  const at = words.indexOf("--pack-destination");
  expect(at, "the documented pack line names --pack-destination").toBeGreaterThan(0);
  words[at + 1] = destination;
  return ["--yes", ...words.slice(1)];
}

function publishable(): string[] {
  const dirs = [...readdirSync(join(ROOT, "packages")).map((name) => join(ROOT, "packages", name)), APP_DIR];
  return dirs.flatMap((dir) => {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      return manifest.private ? [] : [manifest.name as string];
    } catch {
      return [];
    }
  });
}

describe("the packed packages, installed with npm into an empty folder", () => {
  it("run `npx codecell exec` and `npx codecell serve`", { timeout: 600_000 }, async () => {
    const started = Date.now();
    const work = mkdtempSync(join(tmpdir(), "codecell-pack-"));
    const tarballs = join(work, "tarballs");
    const install = join(work, "install");
    mkdirSync(tarballs);
    mkdirSync(install);
    const names = publishable();
    expect(names).toContain("@codecell/gateway");
    await run("npx", documentedPackArgs(tarballs), { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
    const files = readdirSync(tarballs).filter((file) => file.endsWith(".tgz"));
    // The documented command packs exactly the publishable packages: no private one, none left out.
    expect(files.map((file) => file.replace(/-\d+\.\d+\.\d+\.tgz$/, "")).sort()).toEqual(
      names.map((name) => name.replace(/^@/, "").replace("/", "-")).sort(),
    );
    for (const file of files) {
      const { stdout } = await run("tar", ["-xzOf", join(tarballs, file), "package/package.json"]);
      expect(stdout, `${file} still has a workspace: range`).not.toContain("workspace:");
    }
    const { stdout: bin } = await run("tar", [
      "-xzOf",
      join(tarballs, files.find((file) => file.startsWith("codecell-gateway-"))!),
      "package/bin/codecell.js",
    ]);
    expect(bin.startsWith("#!/usr/bin/env node\n")).toBe(true);

    writeFileSync(join(install, "package.json"), JSON.stringify({ name: "empty", private: true }));
    await run(
      "npm",
      [
        "install",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--prefer-offline",
        "--loglevel=error",
        ...files.map((file) => join(tarballs, file)),
      ],
      { cwd: install, maxBuffer: 64 * 1024 * 1024 },
    );
    const installedMs = Date.now() - started;

    // One cell, headless, with the embedded default (its memory server resolved from the install).
    writeFileSync(join(install, "cell.js"), "return { sum: 1 + 1, servers: Object.keys(MCP) };");
    const { stdout } = await run("npx", ["--no-install", "codecell", "exec", "cell.js"], {
      cwd: install,
      env: process.env,
    });
    expect(JSON.parse(stdout)).toMatchObject({ status: "completed", value: { sum: 2, servers: ["memory"] } });

    // The engine embedded by a host, from the same folder: the published engine is one bundle with the
    // packages below it inlined, beside the host's own installed contract and namespaces (the engine
    // package's bundle test runs the same host against the workspace's build).
    copyFileSync(
      join(ROOT, "packages", "engine", "test", "fixtures", "bundle-host.mjs"),
      join(install, "host.mjs"),
    );
    const { stdout: hostOutput } = await run(process.execPath, ["host.mjs"], { cwd: install });
    const seen = JSON.parse(hostOutput);
    expect(seen.engineUrl).toContain("/node_modules/@codecell/engine/dist/bundle/index.js");
    expect(seen.badConfig).toEqual({ instanceOfHostClass: true, isByBrand: true, code: "invalid_config" });
    expect(seen.namespace).toMatchObject({ status: "completed", value: ["object", ["call mom"]] });
    expect(seen.search).toMatchObject({ status: "completed", value: ["notes_add", "notes_list"] });
    expect(seen.refused).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(seen.typescript).toMatchObject({ status: "completed", value: 42 });
    expect(seen.resumed).toMatchObject({ status: "completed", value: "resumed" });

    // MCP over stdio from the same folder: initialize and tools/list.
    const transport = new StdioClientTransport({
      command: "npx",
      args: ["--no-install", "codecell", "serve"],
      cwd: install,
      env: process.env as Record<string, string>,
      stderr: "pipe",
    });
    const client = new Client({ name: "pack-test", version: "1.0.0" });
    try {
      await client.connect(transport);
      expect(client.getServerVersion()?.name).toBe("codecell");
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    } finally {
      await client.close();
    }
    process.stderr.write(
      `pack-install: packed and installed ${names.length} packages in ${installedMs} ms; whole test ${Date.now() - started} ms\n`,
    );
  });
});
