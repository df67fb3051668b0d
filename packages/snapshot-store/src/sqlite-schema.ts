import { createRequire } from "node:module";
import type Database from "better-sqlite3";
import type { RunScope, RunState } from "./types.js";

/**
 * The SQLite store's file: its tables, the rows read from them, and the migration of older files. The
 * statements the backend runs on them are prepared in sqlite-backend.ts.
 */

/**
 * 2: `runs.mac` and `pending_calls.outcome_mac` (HMAC of what a resume trusts). 3: `host_records` owner,
 * bytes, write order and evictable (quotas; a signed record's MAC leads its value).
 */
export const SCHEMA_VERSION = 3;

// Loaded on first use, so a host that keeps the memory backend never loads the native module.
let Driver: typeof Database | undefined;
export function loadDatabase(path: string, timeout: number): Database.Database {
  Driver ??= createRequire(import.meta.url)("better-sqlite3") as typeof Database;
  return new Driver(path, { timeout });
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT NOT NULL UNIQUE,
  agent_id TEXT NOT NULL,
  session_key TEXT NOT NULL,
  session_id TEXT NOT NULL,
  parent_run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  state TEXT NOT NULL,
  live INTEGER NOT NULL,
  snapshot BLOB,
  output_json TEXT,
  telemetry_json TEXT,
  host_state_json TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  purge_at INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL,
  resume_count INTEGER NOT NULL DEFAULT 0,
  claim_token TEXT,
  lease_until INTEGER NOT NULL DEFAULT 0,
  mac BLOB
);
CREATE INDEX IF NOT EXISTS runs_live_expiry ON runs (live, expires_at);
CREATE INDEX IF NOT EXISTS runs_live_principal ON runs (live, agent_id, session_key);
CREATE INDEX IF NOT EXISTS runs_purge ON runs (live, purge_at);
CREATE TABLE IF NOT EXISTS pending_calls (
  run_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  call_id TEXT NOT NULL,
  tool_id TEXT NOT NULL,
  started_at TEXT NOT NULL,
  outcome_json TEXT,
  settled_at TEXT,
  outcome_mac BLOB,
  PRIMARY KEY (run_id, call_id)
);
CREATE TABLE IF NOT EXISTS host_records (
  key TEXT PRIMARY KEY,
  value_json TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
`;

/** Added to `host_records` by version 3 (a lease, and a row of an older file, has no owner: no quota). */
const HOST_QUOTA_COLUMNS: Array<[string, string]> = [
  ["owner", "TEXT"],
  ["bytes", "INTEGER NOT NULL DEFAULT 0"],
  ["seq", "INTEGER NOT NULL DEFAULT 0"],
  ["evictable", "INTEGER NOT NULL DEFAULT 1"],
];

export type RunRow = {
  run_id: string;
  agent_id: string;
  session_key: string;
  session_id: string;
  parent_run_id: string;
  tool_call_id: string;
  state: RunState;
  snapshot: Buffer | null;
  output_json: string | null;
  telemetry_json: string | null;
  host_state_json: string | null;
  created_at: number;
  updated_at: number;
  expires_at: number;
  bytes: number;
  resume_count: number;
  claim_token: string | null;
  lease_until: number;
  mac: Buffer | null;
};

export type CallRow = {
  call_id: string;
  tool_id: string;
  started_at: string;
  outcome_json: string | null;
  settled_at: string | null;
  outcome_mac: Buffer | null;
};

export function scopeOf(row: RunRow): RunScope {
  return {
    agentId: row.agent_id,
    sessionKey: row.session_key,
    sessionId: row.session_id,
    parentRunId: row.parent_run_id,
    toolCallId: row.tool_call_id,
  };
}

/** Brings a file up to SCHEMA_VERSION (a new file gets the tables); a file from a newer package is refused. */
export function migrate(db: Database.Database): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new Error(
      `the file has schema version ${version}, newer than this package understands (${SCHEMA_VERSION})`,
    );
  }
  db.exec(SCHEMA);
  // Version 1 files get the MAC columns; their rows carry no MAC, so with a secret they are refused
  // (an unsigned row is exactly what a forger would write). The file is migrated in place once, so
  // this branch may go in a major version that refuses files below version 2 with a message to open
  // them once with an earlier release first.
  const columns = (table: string) =>
    new Set((db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((column) => column.name));
  if (!columns("runs").has("mac")) db.exec("ALTER TABLE runs ADD COLUMN mac BLOB");
  if (!columns("pending_calls").has("outcome_mac"))
    db.exec("ALTER TABLE pending_calls ADD COLUMN outcome_mac BLOB");
  const hostColumns = columns("host_records");
  for (const [name, type] of HOST_QUOTA_COLUMNS) {
    if (!hostColumns.has(name)) db.exec(`ALTER TABLE host_records ADD COLUMN ${name} ${type}`);
  }
  db.exec("CREATE INDEX IF NOT EXISTS host_records_owner ON host_records (owner, seq)");
  db.exec("CREATE INDEX IF NOT EXISTS host_records_expiry ON host_records (expires_at)");
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
}
