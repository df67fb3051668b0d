import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The bin of an npm-installed MCP server, resolved inside node_modules (never downloaded). */
export function serverBin(packageName: string): string {
  const manifestPath = require.resolve(`${packageName}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { bin: string | Record<string, string> };
  const bin = typeof manifest.bin === "string" ? manifest.bin : Object.values(manifest.bin)[0]!;
  return join(dirname(manifestPath), bin);
}

export const controlServerPath = join(packageDir, "test/fixtures/control-server.mjs");
const localhostPreload = join(packageDir, "test/fixtures/listen-on-localhost.mjs");

/** Starts server-everything over HTTP on 127.0.0.1 and a free port; resolves with its base URL. */
export async function startEverythingHttp(
  mode: "streamableHttp" | "sse",
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    ["--import", localhostPreload, serverBin("@modelcontextprotocol/server-everything"), mode],
    {
      env: { ...process.env, PORT: "0" },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  const port = await new Promise<number>((resolvePort, reject) => {
    let output = "";
    const timer = setTimeout(
      () => reject(new Error(`server-everything ${mode} did not start: ${output}`)),
      15_000,
    );
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /CODECELL_TEST_PORT=(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`server-everything ${mode} exited with ${code}: ${output}`)),
    );
  });
  return { url: `http://127.0.0.1:${port}`, child };
}
