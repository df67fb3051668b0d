// Shared by the browser tests and the bench (plain JavaScript so the bench runs on Node 20 without a
// TypeScript step): where Chromium is, how it is started here, and the built gateway as a child process.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const CHROMIUM = "/usr/bin/chromium";

/** Headless, and no background traffic: this machine's closed network refuses it, many times a start. */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export const GATEWAY_CLI = fileURLToPath(new URL("../../gateway/dist/cli.js", import.meta.url));

/**
 * @typedef {object} RunningGateway
 * @property {string} url The page, e.g. http://127.0.0.1:40123/
 * @property {string} mcpUrl
 * @property {() => string} output
 * @property {() => Promise<number | null>} stop
 */

/**
 * Starts the built gateway CLI on its embedded default config, on a free loopback port (port 0: the
 * kernel picks one, the banner says which). CODECELL_DATA_DIR (and TMPDIR) point at a fresh folder so the
 * memory MCP server starts from an empty graph file and the run leaves nothing in the user's data folder.
 * @returns {Promise<RunningGateway>}
 */
export async function startGateway() {
  if (!existsSync(GATEWAY_CLI)) {
    throw new Error(
      `The gateway is not built (${GATEWAY_CLI} is missing). Run \`pnpm turbo run build --filter=@codecell/playground...\` first.`,
    );
  }
  const temp = mkdtempSync(join(tmpdir(), "codecell-playground-"));
  const child = spawn(process.execPath, [GATEWAY_CLI, "serve", "--http", "0", "--host", "127.0.0.1"], {
    env: { ...process.env, TMPDIR: temp, CODECELL_DATA_DIR: temp },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  /** @param {Buffer} chunk */
  const collect = (chunk) => {
    output += chunk.toString("utf8");
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  /** @type {string} */
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`The gateway did not start within 30 s. Its output:\n${output}`));
    }, 30_000);
    const check = () => {
      const match = /Playground\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout.off("data", check);
      resolve(/** @type {string} */ (match[1]));
    };
    child.stdout.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`The gateway exited with code ${code} before it was ready. Its output:\n${output}`));
    });
  });
  return {
    url,
    mcpUrl: `${url}mcp`,
    output: () => output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      /** @type {Promise<number | null>} */
      const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await exited;
      clearTimeout(killer);
      rmSync(temp, { recursive: true, force: true });
      return code;
    },
  };
}
