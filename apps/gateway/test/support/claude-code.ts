import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** The native `claude` binary of the pinned `@anthropic-ai/claude-code` (its postinstall puts it in bin/). */
export const CLAUDE_BIN = join(
  dirname(createRequire(import.meta.url).resolve("@anthropic-ai/claude-code/package.json")),
  "bin",
  "claude.exe",
);

/** What `claude -p --output-format json` prints: the fields the tests read. */
export type ClaudeCodeResult = { result: string; is_error: boolean; num_turns: number; subtype: string };

/**
 * Runs the real Claude Code headless against `baseUrl` (the gateway) in a fresh folder with a fresh
 * HOME, with nothing of it reaching anywhere else (no updates, telemetry or other traffic), and
 * returns its JSON result. `allowedTools` are the tools it may run without asking.
 */
export function runClaudeCode(options: {
  baseUrl: string;
  apiKey: string;
  prompt: string;
  cwd: string;
  allowedTools: string[];
  timeoutMs?: number;
}): Promise<ClaudeCodeResult> {
  const home = mkdtempSync(join(tmpdir(), "codecell-claude-home-"));
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    ANTHROPIC_BASE_URL: options.baseUrl,
    ANTHROPIC_API_KEY: options.apiKey,
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  };
  const args = [
    "-p",
    options.prompt,
    "--output-format",
    "json",
    "--allowedTools",
    options.allowedTools.join(","),
  ];
  return new Promise((resolve, reject) => {
    execFile(
      CLAUDE_BIN,
      args,
      { cwd: options.cwd, env, timeout: options.timeoutMs ?? 90_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const text = stdout.trim();
        try {
          resolve(JSON.parse(text.slice(text.lastIndexOf("\n{") + 1)) as ClaudeCodeResult);
        } catch {
          reject(
            new Error(`claude printed no JSON result (${error?.message ?? "exit 0"}): ${stdout}\n${stderr}`),
          );
        }
      },
    );
  });
}
