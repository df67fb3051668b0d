// The packages as someone without the repository gets them: packed with pnpm as docs/operating.md
// shows ("Installing without cloning"), installed into an empty folder with npm alone (production
// dependencies, install scripts run, so better-sqlite3 is compiled when no prebuilt binary downloads),
// then run: `codecell --version`, `codecell exec`, `codecell serve` over stdio, and the complete host of
// docs/embedding.md with its SQLite store. The image's install stage does the same install inside its build.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sdkClientModule } from "./gateway-client.mjs";
import { run } from "./podman.mjs";

const PNPM = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).packageManager;

/** The `js host` example of docs/embedding.md, as the page shows it. */
function embeddingExample(root) {
  const page = readFileSync(join(root, "docs", "embedding.md"), "utf8");
  const match = page.match(/```js host\n([\s\S]*?)\n```/);
  if (!match) throw new Error("docs/embedding.md has no ```js host block");
  return match[1];
}

/** Packs every publishable package into tarballDir; resolves with the tarballs' paths. */
export async function packPackages(root, tarballDir) {
  mkdirSync(tarballDir, { recursive: true });
  await run(
    "npx",
    [
      "--yes",
      PNPM,
      "-r",
      "--filter",
      "./packages/*",
      "--filter",
      "./apps/gateway",
      "pack",
      "--pack-destination",
      tarballDir,
    ],
    { cwd: root, timeoutMs: 300_000 },
  );
  const files = readdirSync(tarballDir).filter((file) => file.endsWith(".tgz"));
  assert.ok(
    files.some((file) => file.startsWith("codecell-gateway-")),
    `no gateway tarball in ${files.join(", ")}`,
  );
  return files.map((file) => join(tarballDir, file));
}

/** npm alone, into an empty folder, production dependencies only; then pruned as the image prunes it. */
export async function installPackages(root, tarballs, installDir) {
  mkdirSync(installDir, { recursive: true });
  writeFileSync(
    join(installDir, "package.json"),
    `${JSON.stringify({ name: "codecell-install", private: true })}\n`,
  );
  await run(
    "npm",
    [
      "install",
      "--omit=dev",
      "--no-package-lock",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      ...tarballs,
    ],
    { cwd: installDir, timeoutMs: 900_000 },
  );
  await run("sh", [join(root, "container", "prune-install.sh"), installDir]);
}

/** Runs the installed packages the ways the docs show. */
export async function runInstalledPackages(root, installDir, log) {
  const gatewayVersion = JSON.parse(
    readFileSync(join(root, "apps", "gateway", "package.json"), "utf8"),
  ).version;
  const npx = (args, options = {}) =>
    run("npx", ["--no-install", "codecell", ...args], { cwd: installDir, ...options });

  const { stdout: version } = await npx(["--version"]);
  assert.match(version.trim(), new RegExp(`^(codecell )?${gatewayVersion.replaceAll(".", "\\.")}$`));
  log(`npx codecell --version: ${version.trim()}`);

  writeFileSync(join(installDir, "cell.js"), "return { sum: 20 + 22, servers: Object.keys(MCP) };");
  const { stdout: cell } = await npx(["exec", "cell.js"]);
  assert.deepEqual(JSON.parse(cell).value, { sum: 42, servers: ["memory"] });
  rmSync(join(installDir, "cell.js"));
  log("npx codecell exec: a cell completed");

  // `codecell serve` over stdio, with the MCP SDK client the workspace has.
  const { Client } = await sdkClientModule("index.js");
  const { StdioClientTransport } = await sdkClientModule("stdio.js");
  const client = new Client({ name: "container-check", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: "npx",
      args: ["--no-install", "codecell", "serve"],
      cwd: installDir,
      stderr: "pipe",
    }),
  );
  try {
    const result = await client.callTool({ name: "exec", arguments: { code: "return 6 * 7;" } });
    assert.deepEqual(
      { status: result.structuredContent.status, value: result.structuredContent.value },
      { status: "completed", value: 42 },
    );
  } finally {
    await client.close();
  }
  log("npx codecell serve: initialize and an exec over stdio");

  // docs/embedding.md's complete host, beside the installed packages, its store in a folder of its own.
  const host = join(installDir, "embedding-host.mjs");
  const cwd = mkdtempSync(join(tmpdir(), "codecell-host-"));
  writeFileSync(host, embeddingExample(root));
  try {
    const { stdout } = await run(process.execPath, [host], { cwd, timeoutMs: 120_000 });
    assert.match(stdout, /\[ 'exec', 'wait' \]/);
    assert.match(stdout, /"status":"waiting"/);
    assert.match(stdout, /\{"status":"completed","value":\{"number":7,"state":"closed"\}/);
    assert.ok(readdirSync(cwd).includes("runs.db"), "the host's SQLite store was not written");
  } finally {
    rmSync(host);
    rmSync(cwd, { recursive: true, force: true });
  }
  log("docs/embedding.md's host ran against the installed packages (SQLite store included)");
}
