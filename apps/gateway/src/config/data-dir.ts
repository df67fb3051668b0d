import { homedir } from "node:os";
import { join } from "node:path";

/**
 * The per-user folder where the embedded default keeps state that must outlive one run (the memory MCP
 * server's knowledge graph), so two users, or a user and the test suite, never share one file in /tmp.
 * `CODECELL_DATA_DIR` wins; otherwise the platform's per-user data folder: `$XDG_DATA_HOME/codecell`
 * (default `~/.local/share/codecell`) on Linux and other Unixes, `~/Library/Application Support/codecell`
 * on macOS, `%LOCALAPPDATA%\codecell` on Windows.
 */
export function userDataDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  if (env.CODECELL_DATA_DIR) return env.CODECELL_DATA_DIR;
  if (platform === "win32") return join(env.LOCALAPPDATA || join(homedir(), "AppData", "Local"), "codecell");
  if (platform === "darwin") return join(homedir(), "Library", "Application Support", "codecell");
  const xdg = env.XDG_DATA_HOME;
  // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
  return join(xdg?.startsWith("/") ? xdg : join(homedir(), ".local", "share"), "codecell");
}
