import type { ChildProcess } from "node:child_process";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

/** Every downstream server process this process started and that has not exited yet. */
const live = new Set<ChildProcess>();

/**
 * Keeps the child process a stdio transport spawns, from the moment it is spawned until it exits, so
 * it can be killed on any path: a failed start, a shutdown, or a crash of the host. The SDK forgets a
 * process as soon as its close begins (and only kills it seconds later), and keeps it in a private
 * `_process` field; if a later SDK renames it this throws, so the change is caught by tests.
 */
export function trackSpawnedProcess(transport: StdioClientTransport): void {
  const start = transport.start.bind(transport);
  transport.start = () => {
    const started = start();
    const child = (transport as unknown as { _process?: ChildProcess })._process;
    if (!child || typeof child.once !== "function") {
      throw new Error(
        "The MCP SDK's stdio client transport has no _process field; update trackSpawnedProcess.",
      );
    }
    if (child.exitCode === null && child.signalCode === null) {
      live.add(child);
      child.once("exit", () => live.delete(child));
      child.once("error", () => live.delete(child));
    }
    return started;
  };
}

/** Process ids of the downstream servers still running. */
export function spawnedServerPids(): number[] {
  return [...live].flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
}

/**
 * Kills every downstream server still running, at once and synchronously (SIGKILL), so it is safe in
 * a process `exit` handler: a host that stops by any path leaves no orphan behind. Returns how many.
 */
export function killSpawnedServers(): number {
  let killed = 0;
  for (const child of live) {
    try {
      if (child.kill("SIGKILL")) killed++;
    } catch {
      // Already gone.
    }
  }
  live.clear();
  return killed;
}
