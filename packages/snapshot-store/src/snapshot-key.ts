import { randomBytes } from "node:crypto";
import { closeSync, fstatSync, openSync, readFileSync, writeSync } from "node:fs";
import { CodeModeError } from "@codecell/contract";

/** Shortest integrity key accepted, as for the Redis backend's `secret`. */
export const MIN_SNAPSHOT_KEY_BYTES = 32;

/**
 * Where the key that signs snapshots (HMAC-SHA-256) comes from:
 * - `secret`: given by the operator (config, environment); every process restoring the store's runs
 *   needs the same one. Required for stores shared between hosts (Redis).
 * - `keyFile`: generated on first use and kept owner-only (0600), typically next to a SQLite file, so
 *   the store file alone is not enough to forge a run. Every later start reads it back.
 * - `ephemeral`: a random key for this process only, for stores that do not outlive it (memory).
 */
export type SnapshotKeySource =
  | { kind: "secret"; secret: string | Uint8Array }
  | { kind: "keyFile"; path: string }
  | { kind: "ephemeral" };

function invalid(message: string): CodeModeError {
  return new CodeModeError("invalid_config", message);
}

function fromSecret(secret: string | Uint8Array): string {
  const text = typeof secret === "string" ? secret : Buffer.from(secret).toString("base64");
  const bytes = typeof secret === "string" ? Buffer.byteLength(secret) : secret.byteLength;
  if (bytes < MIN_SNAPSHOT_KEY_BYTES) {
    throw invalid(
      `The snapshot signing secret has ${bytes} bytes; at least ${MIN_SNAPSHOT_KEY_BYTES} are needed (e.g. openssl rand -base64 48).`,
    );
  }
  return text;
}

/** Reads the key file, refusing one that others can read or write; creates it (0600) when missing. */
function fromKeyFile(path: string): string {
  let fd: number;
  try {
    // "wx": created only if absent, so two processes starting at once cannot overwrite each other's key.
    fd = openSync(path, "wx", 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
      throw invalid(`Cannot create the snapshot key file ${path}: ${(error as Error).message}.`);
    }
    return readKeyFile(path);
  }
  try {
    writeSync(fd, `${randomBytes(48).toString("base64")}\n`);
  } finally {
    closeSync(fd);
  }
  return readKeyFile(path);
}

function readKeyFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw invalid(`Cannot read the snapshot key file ${path}: ${(error as Error).message}.`);
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw invalid(`The snapshot key file ${path} is not a regular file.`);
    if ((info.mode & 0o077) !== 0) {
      throw invalid(
        `The snapshot key file ${path} can be read or written by others (mode ${(info.mode & 0o777).toString(8)}); anyone who can read it can forge runs. Run chmod 600 on it.`,
      );
    }
    if (typeof process.getuid === "function" && info.uid !== process.getuid()) {
      throw invalid(`The snapshot key file ${path} belongs to another user; it must be this user's own.`);
    }
    const key = readFileSync(fd, "utf8").trim();
    if (Buffer.byteLength(key) < MIN_SNAPSHOT_KEY_BYTES) {
      throw invalid(
        `The snapshot key file ${path} holds ${Buffer.byteLength(key)} bytes; at least ${MIN_SNAPSHOT_KEY_BYTES} are needed. Delete it to have a new one generated (waiting runs signed with the old key are then lost).`,
      );
    }
    return key;
  } finally {
    closeSync(fd);
  }
}

/** The signing key a source names, as the sandbox's `snapshotSecret` takes it. */
export function loadSnapshotKey(source: SnapshotKeySource): string {
  switch (source.kind) {
    case "secret":
      return fromSecret(source.secret);
    case "keyFile":
      return fromKeyFile(source.path);
    case "ephemeral":
      return randomBytes(48).toString("base64");
  }
}

/** The key file kept beside a SQLite store: `<database path>.key`. */
export function keyFileFor(databasePath: string): string {
  return `${databasePath}.key`;
}
