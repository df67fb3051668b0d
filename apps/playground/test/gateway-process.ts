import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const GATEWAY_CLI = fileURLToPath(new URL("../../gateway/dist/cli.js", import.meta.url));

export type RunningGateway = {
  /** The page, e.g. http://127.0.0.1:40123/ */
  url: string;
  mcpUrl: string;
  output(): string;
  stop(): Promise<number | null>;
};

/**
 * Starts the built gateway CLI on its embedded default config, on a free loopback port (port 0: the
 * kernel picks one, the banner says which). TMPDIR points at a fresh folder so the memory MCP server
 * starts from an empty graph file and the run leaves nothing behind.
 */
export async function startGateway(): Promise<RunningGateway> {
  if (!existsSync(GATEWAY_CLI)) {
    throw new Error(
      `The gateway is not built (${GATEWAY_CLI} is missing). Run \`pnpm turbo run build --filter=@codecell/playground...\` first.`,
    );
  }
  const temp = mkdtempSync(join(tmpdir(), "codecell-playground-"));
  const child: ChildProcess = spawn(
    process.execPath,
    [GATEWAY_CLI, "serve", "--http", "0", "--host", "127.0.0.1"],
    { env: { ...process.env, TMPDIR: temp }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`The gateway did not start within 30 s. Its output:\n${output}`));
    }, 30_000);
    const check = () => {
      const match = /Playground\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout?.off("data", check);
      resolve(match[1]!);
    };
    child.stdout?.on("data", check);
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
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await exited;
      clearTimeout(killer);
      rmSync(temp, { recursive: true, force: true });
      return code;
    },
  };
}
