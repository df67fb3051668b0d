import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { CodeModeError } from "@codecell/contract";

/** Limits on what the file tools may write, from the config's `workspace` entry. */
export type WorkspaceLimits = {
  /** Largest total size of the regular files in the workspace that write_file may grow it to. */
  maxBytes: number;
  /** Largest number of bytes write_file may write in one code-mode run (exec plus its waits). */
  maxWriteBytesPerRun: number;
};

export const DEFAULT_WORKSPACE_LIMITS: WorkspaceLimits = {
  maxBytes: 1024 * 1024 * 1024,
  maxWriteBytesPerRun: 64 * 1024 * 1024,
};

/** The usage measured by walking is trusted this long; others (the shell, the user) change it too. */
const REMEASURE_AFTER_MS = 30_000;
/** A walk stops after this many entries; a larger workspace is measured in part. */
const MAX_MEASURED_ENTRIES = 200_000;
/** Runs remembered for their budget; the oldest is forgotten first. */
const MAX_TRACKED_RUNS = 10_000;

function mib(bytes: number): string {
  return bytes < 1024 * 1024 ? `${bytes} bytes` : `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * Counts the bytes the workspace holds and the bytes each run wrote, and refuses a write that would
 * pass either limit before any byte of it is written.
 */
export class WorkspaceQuota {
  readonly #root: string;
  readonly limits: WorkspaceLimits;
  #used: number | null = null;
  #measuredAt = 0;
  #measuring: Promise<number> | null = null;
  readonly #runs = new Map<string, number>();

  constructor(root: string, limits: WorkspaceLimits) {
    this.#root = root;
    this.limits = limits;
  }

  /** Total size of the regular files under the root, not following links. */
  async #measure(): Promise<number> {
    let total = 0;
    let seen = 0;
    const folders = [this.#root];
    while (folders.length > 0 && seen < MAX_MEASURED_ENTRIES) {
      const folder = folders.pop()!;
      const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        if (++seen > MAX_MEASURED_ENTRIES) break;
        const path = join(folder, entry.name);
        if (entry.isDirectory()) folders.push(path);
        else if (entry.isFile()) total += (await lstat(path).catch(() => null))?.size ?? 0;
      }
    }
    return total;
  }

  async #usage(): Promise<number> {
    if (this.#used !== null && Date.now() - this.#measuredAt < REMEASURE_AFTER_MS) return this.#used;
    this.#measuring ??= this.#measure().finally(() => {
      this.#measuring = null;
    });
    const measured = await this.#measuring;
    if (this.#used === null || Date.now() - this.#measuredAt >= REMEASURE_AFTER_MS) {
      this.#used = measured;
      this.#measuredAt = Date.now();
    }
    return this.#used;
  }

  /**
   * Books a write of `bytes` replacing a file of `replacing` bytes, or throws `nested_tool_failed` naming
   * the limit. `runKey` identifies the code-mode run; without one the write is its own run.
   */
  async reserve(
    tool: string,
    path: string,
    bytes: number,
    replacing: number,
    runKey?: string,
  ): Promise<void> {
    const spent = runKey ? (this.#runs.get(runKey) ?? 0) : 0;
    if (spent + bytes > this.limits.maxWriteBytesPerRun) {
      throw new CodeModeError(
        "nested_tool_failed",
        `${tool}: writing ${bytes} bytes to "${path}" would pass this run's write budget of ${mib(this.limits.maxWriteBytesPerRun)} (${spent} bytes written so far). Write less per run, or raise workspace.maxWriteBytesPerRun in the gateway config.`,
        { limit: "workspace.maxWriteBytesPerRun", bytes, spent, max: this.limits.maxWriteBytesPerRun },
      );
    }
    const used = await this.#usage();
    const grown = used + bytes - replacing;
    if (bytes > replacing && grown > this.limits.maxBytes) {
      throw new CodeModeError(
        "nested_tool_failed",
        `${tool}: writing ${bytes} bytes to "${path}" would grow the workspace to ${mib(grown)}, over its quota of ${mib(this.limits.maxBytes)}. Delete files, or raise workspace.maxBytes in the gateway config.`,
        { limit: "workspace.maxBytes", bytes, used, max: this.limits.maxBytes },
      );
    }
    this.#used = Math.max(0, grown);
    if (runKey) {
      this.#runs.delete(runKey);
      this.#runs.set(runKey, spent + bytes);
      if (this.#runs.size > MAX_TRACKED_RUNS) this.#runs.delete(this.#runs.keys().next().value!);
    }
  }

  /** Gives back a booking whose write failed before any byte reached the file. */
  release(bytes: number, replacing: number, runKey?: string): void {
    if (this.#used !== null) this.#used = Math.max(0, this.#used - bytes + replacing);
    if (runKey && this.#runs.has(runKey)) {
      this.#runs.set(runKey, Math.max(0, this.#runs.get(runKey)! - bytes));
    }
  }
}
