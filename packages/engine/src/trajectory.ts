import { createRequire } from "node:module";
import { CodeModeError, type JsonValue } from "@codecell/contract";
import type * as Zod from "zod";

/**
 * One recorded tool call. `control` entries are the model's exec and wait calls; `nested` entries are
 * the tool calls guest code made under them, linked by `parentToolCallId`.
 */
export type TrajectoryEntry = {
  kind: "control" | "nested";
  /** The model's tool call id (control) or `<parent toolCallId>/<request id>` (nested). */
  toolCallId: string;
  parentToolCallId?: string;
  /** `exec` or `wait` for control entries; the catalog id for nested ones. */
  tool: string;
  codeModeRunId?: string;
  /** How guest code reached the tool (nested entries). */
  via?: string;
  /** Redacted input (nested entries) or the cell's language (control entries). */
  input?: JsonValue;
  status: "running" | "completed" | "waiting" | "failed";
  /** The guest's `yield_control(reason)` text, when a control call ended waiting on a yield. */
  yieldReason?: string;
  code?: string;
  error?: string;
  /** Lines the host's executor added, such as an approval decision. */
  notes?: string[];
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
};

export const TRAJECTORY_FORMAT = "codecell.trajectory/1";

/** What a host persists with its transcript; `importTrajectory` reads it back. */
export type TrajectoryExport = { format: typeof TRAJECTORY_FORMAT; entries: TrajectoryEntry[] };

/** How much trajectory an engine keeps. Every bound is in bytes of JSON (UTF-8) or in entries. */
export type TrajectoryLimits = {
  /** A session's entries together; the oldest go first when a new one would pass it. Default 2 MiB. */
  maxBytesPerSession: number;
  /** One entry's input (a nested call's input, an exec cell's code); longer ones are truncated. Default 32 KiB. */
  maxInputBytes: number;
  /** Entries of one session. Default 10,000. */
  maxEntriesPerSession: number;
  /** All sessions together; the least recently written sessions go first. Default 64 MiB. */
  maxTotalBytes: number;
};

export const DEFAULT_TRAJECTORY_LIMITS: TrajectoryLimits = {
  maxBytesPerSession: 2 * 1024 * 1024,
  maxInputBytes: 32 * 1024,
  maxEntriesPerSession: 10_000,
  maxTotalBytes: 64 * 1024 * 1024,
};

/** What an input longer than `maxInputBytes` is replaced with: its size and the start of its JSON. */
export type TruncatedInput = { $truncated: { bytes: number; preview: string } };

// What an entry costs besides its input, error and notes: ids, tool, status and timestamps.
const ENTRY_OVERHEAD_BYTES = 256;
const PREVIEW_CHARS = 512;

/** The recorder's handle on one entry while it runs; fields are set through the recorder. */
export type TrajectoryHandle = {
  readonly kind: TrajectoryEntry["kind"];
  readonly toolCallId: string;
  readonly tool: string;
};

type SessionLog = {
  readonly sessionId: string;
  entries: EntryRecord[];
  /** Index of the oldest kept entry; entries before it were evicted and wait to be compacted away. */
  head: number;
  bytes: number;
  live: boolean;
  /** Sequence number of its latest entry. */
  lastWrite: number;
};

/**
 * Entries keep their times as milliseconds since this module loaded: a small integer is stored in the
 * record itself, while an epoch timestamp is a heap number of its own. Every nested call keeps an entry
 * until newer ones push it out, so each is copied to the old generation, and two objects fewer per entry
 * is garbage-collector time saved on every call. (Past about 24 days of uptime the offsets no longer fit
 * and V8 stores them as numbers again: slower, still right.)
 */
const TIME_ORIGIN = Date.now();
const sinceOrigin = (): number => Date.now() - TIME_ORIGIN;
const isoAt = (offset: number): string => new Date(TIME_ORIGIN + offset).toISOString();

// A class with every field set in the constructor: one object shape for every entry keeps recording
// monomorphic, which is most of what makes it cheap on the nested-call path.
class EntryRecord implements TrajectoryHandle {
  inputJson: string | undefined = undefined;
  status: TrajectoryEntry["status"] = "running";
  yieldReason: string | undefined = undefined;
  code: string | undefined = undefined;
  error: string | undefined = undefined;
  notes: string[] | undefined = undefined;
  /** Milliseconds since TIME_ORIGIN. */
  endedAt: number | undefined = undefined;
  bytes = 0;
  evicted = false;

  constructor(
    readonly seq: number,
    readonly log: SessionLog,
    readonly kind: TrajectoryEntry["kind"],
    readonly toolCallId: string,
    readonly tool: string,
    readonly parentToolCallId: string | undefined,
    public codeModeRunId: string | undefined,
    readonly via: string | undefined,
    /** Milliseconds since TIME_ORIGIN. */
    readonly startedAt: number,
  ) {}
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * The trajectory of control and nested calls, one log per session. Each log is bounded in bytes and
 * entries (oldest first out), an input longer than `maxInputBytes` is kept as a `$truncated` marker
 * with a preview, all logs together are bounded (least recently written session first out), and a
 * session's log is freed with `forget`. Recording serializes the input once (the byte cap needs its
 * size) and keeps that text; everything else on the hot path is constant work.
 */
export class TrajectoryRecorder {
  readonly #logs = new Map<string, SessionLog>();
  readonly #limits: TrajectoryLimits;
  #totalBytes = 0;
  #seq = 0;

  constructor(limits: Partial<TrajectoryLimits> = {}) {
    this.#limits = { ...DEFAULT_TRAJECTORY_LIMITS, ...limits };
  }

  /** Bytes held by all sessions' logs (as the caps count them). */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** Sessions that have a log. */
  get sessionCount(): number {
    return this.#logs.size;
  }

  start(
    sessionId: string,
    entry: Pick<
      TrajectoryEntry,
      "kind" | "toolCallId" | "parentToolCallId" | "tool" | "codeModeRunId" | "via"
    > & {
      input?: JsonValue;
    },
  ): TrajectoryHandle {
    const log = this.#log(sessionId);
    const record = new EntryRecord(
      ++this.#seq,
      log,
      entry.kind,
      entry.toolCallId,
      entry.tool,
      entry.parentToolCallId,
      entry.codeModeRunId,
      entry.via,
      sinceOrigin(),
    );
    const { input } = entry;
    let size = ENTRY_OVERHEAD_BYTES;
    if (input !== undefined) {
      const inputJson = this.#boundedJson(input);
      record.inputJson = inputJson;
      size += utf8Bytes(inputJson);
    }
    log.entries.push(record);
    this.#grow(record, size);
    this.#trim(log);
    return record;
  }

  /** Sets the run id or the yield reason of an entry once they are known. */
  annotate(handle: TrajectoryHandle, fields: { codeModeRunId?: string; yieldReason?: string }): void {
    const record = handle as EntryRecord;
    if (fields.codeModeRunId !== undefined) record.codeModeRunId = fields.codeModeRunId;
    if (fields.yieldReason !== undefined) {
      record.yieldReason = fields.yieldReason;
      this.#grow(record, utf8Bytes(fields.yieldReason));
    }
  }

  end(
    handle: TrajectoryHandle,
    status: TrajectoryEntry["status"],
    failure?: { code?: string; error: string },
  ): void {
    const record = handle as EntryRecord;
    record.status = status;
    record.endedAt = sinceOrigin();
    if (failure?.code) record.code = failure.code;
    if (failure) {
      record.error = failure.error.length > 2000 ? `${failure.error.slice(0, 2000)}…` : failure.error;
      this.#grow(record, utf8Bytes(record.error));
    }
  }

  /** At most 20 notes of 500 characters per entry: hosts annotate decisions, not logs. */
  note(handle: TrajectoryHandle, text: string): void {
    const record = handle as EntryRecord;
    record.notes ??= [];
    if (record.notes.length >= 20) return;
    const line = String(text).slice(0, 500);
    record.notes.push(line);
    this.#grow(record, utf8Bytes(line));
  }

  /** Replaces an entry's input (already bounded and redacted by the caller) from what was recorded. */
  updateInput(handle: TrajectoryHandle, update: (recorded: JsonValue | undefined) => JsonValue): void {
    const record = handle as EntryRecord;
    const before = record.inputJson;
    const next = this.#boundedJson(
      update(before === undefined ? undefined : (JSON.parse(before) as JsonValue)),
    );
    record.inputJson = next;
    this.#grow(record, utf8Bytes(next) - (before === undefined ? 0 : utf8Bytes(before)));
  }

  /** Frees a session's log; entries still running are no longer kept or counted. */
  forget(sessionId: string): boolean {
    const log = this.#logs.get(sessionId);
    if (!log) return false;
    log.live = false;
    this.#totalBytes -= log.bytes;
    this.#logs.delete(sessionId);
    return true;
  }

  clear(): void {
    for (const sessionId of [...this.#logs.keys()]) this.forget(sessionId);
  }

  /**
   * Entries in recording order. With `sessionId`, only that session's log is read (nothing of another
   * session is copied); without it, every session's.
   */
  export(filter?: {
    sessionId?: string;
    parentToolCallId?: string;
    codeModeRunId?: string;
  }): TrajectoryExport {
    let records: EntryRecord[];
    if (filter?.sessionId !== undefined) {
      const log = this.#logs.get(filter.sessionId);
      records = log ? log.entries.slice(log.head) : [];
    } else {
      records = [...this.#logs.values()].flatMap((log) => log.entries.slice(log.head));
      records.sort((a, b) => a.seq - b.seq);
    }
    const entries: TrajectoryEntry[] = [];
    for (const record of records) {
      if (
        filter?.parentToolCallId &&
        record.parentToolCallId !== filter.parentToolCallId &&
        record.toolCallId !== filter.parentToolCallId
      ) {
        continue;
      }
      if (filter?.codeModeRunId && record.codeModeRunId !== filter.codeModeRunId) continue;
      entries.push(toEntry(record));
    }
    return { format: TRAJECTORY_FORMAT, entries };
  }

  #log(sessionId: string): SessionLog {
    let log = this.#logs.get(sessionId);
    if (!log) {
      log = { sessionId, entries: [], head: 0, bytes: 0, live: true, lastWrite: 0 };
      this.#logs.set(sessionId, log);
    }
    // The total cap frees the sessions written to longest ago first.
    log.lastWrite = this.#seq + 1;
    return log;
  }

  #boundedJson(input: JsonValue): string {
    let json: string;
    try {
      json = JSON.stringify(input) ?? "null";
    } catch {
      // A redaction hook may hand back what JSON cannot hold (a cycle, a BigInt).
      json = JSON.stringify({ $unserializable: true });
    }
    // A UTF-16 code unit is at most 3 UTF-8 bytes: short texts need no byte count.
    if (json.length <= this.#limits.maxInputBytes / 3 || utf8Bytes(json) <= this.#limits.maxInputBytes) {
      return json;
    }
    const marker: TruncatedInput = {
      $truncated: { bytes: utf8Bytes(json), preview: json.slice(0, PREVIEW_CHARS) },
    };
    return JSON.stringify(marker);
  }

  #grow(record: EntryRecord, bytes: number): void {
    if (record.evicted || !record.log.live) return;
    record.bytes += bytes;
    record.log.bytes += bytes;
    this.#totalBytes += bytes;
  }

  #trim(log: SessionLog): void {
    const limits = this.#limits;
    // Keep the newest entry even when it alone passes the cap (its input is bounded anyway).
    while (
      log.entries.length - log.head > 1 &&
      (log.bytes > limits.maxBytesPerSession || log.entries.length - log.head > limits.maxEntriesPerSession)
    ) {
      this.#evict(log.entries[log.head]!);
      // Let go of it now, not at the next compaction: a busy session would keep twice its cap alive.
      log.entries[log.head] = undefined as never;
      log.head++;
    }
    if (log.head > 1024 && log.head * 2 > log.entries.length) {
      log.entries = log.entries.slice(log.head);
      log.head = 0;
    }
    while (this.#totalBytes > limits.maxTotalBytes) {
      let idlest: SessionLog | undefined;
      for (const other of this.#logs.values()) {
        if (other !== log && (idlest === undefined || other.lastWrite < idlest.lastWrite)) idlest = other;
      }
      if (idlest === undefined) break;
      this.forget(idlest.sessionId);
    }
  }

  #evict(record: EntryRecord): void {
    record.evicted = true;
    record.log.bytes -= record.bytes;
    this.#totalBytes -= record.bytes;
  }
}

function toEntry(record: EntryRecord): TrajectoryEntry {
  const entry: TrajectoryEntry = {
    kind: record.kind,
    toolCallId: record.toolCallId,
    tool: record.tool,
    status: record.status,
    startedAt: isoAt(record.startedAt),
  };
  if (record.parentToolCallId !== undefined) entry.parentToolCallId = record.parentToolCallId;
  if (record.codeModeRunId !== undefined) entry.codeModeRunId = record.codeModeRunId;
  if (record.via !== undefined) entry.via = record.via;
  if (record.inputJson !== undefined) entry.input = JSON.parse(record.inputJson) as JsonValue;
  if (record.yieldReason !== undefined) entry.yieldReason = record.yieldReason;
  if (record.code !== undefined) entry.code = record.code;
  if (record.error !== undefined) entry.error = record.error;
  if (record.notes !== undefined) entry.notes = [...record.notes];
  if (record.endedAt !== undefined) {
    entry.endedAt = isoAt(record.endedAt);
    entry.durationMs = record.endedAt - record.startedAt;
  }
  return entry;
}

/**
 * The schema `importTrajectory` checks against, built on first use: zod (about half of the engine's
 * import CPU) is loaded only when a host reads a trajectory back, never on the way to a first exec.
 */
function trajectorySchema() {
  const { z } = createRequire(import.meta.url)("zod") as typeof Zod;
  const entrySchema = z.object({
    kind: z.enum(["control", "nested"]),
    toolCallId: z.string().min(1),
    parentToolCallId: z.string().optional(),
    tool: z.string().min(1),
    codeModeRunId: z.string().optional(),
    via: z.string().optional(),
    input: z.json().optional(),
    status: z.enum(["running", "completed", "waiting", "failed"]),
    yieldReason: z.string().optional(),
    code: z.string().optional(),
    error: z.string().optional(),
    notes: z.array(z.string()).optional(),
    startedAt: z.string(),
    endedAt: z.string().optional(),
    durationMs: z.number().optional(),
  });
  return z.object({ format: z.literal(TRAJECTORY_FORMAT), entries: z.array(entrySchema) });
}

/** Reads back an exported trajectory (from a transcript store), refusing anything malformed. */
export function importTrajectory(data: unknown): TrajectoryExport {
  const parsed = trajectorySchema().safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CodeModeError(
      "invalid_input",
      `Not a codecell trajectory: ${issue.path.join(".") || "value"}: ${issue.message}.`,
    );
  }
  return parsed.data as TrajectoryExport;
}

/**
 * Projects a trajectory onto transcript-style tool calls: each control call with its nested calls as
 * children, the way a support bundle shows what happened.
 */
export function trajectoryTree(
  trajectory: TrajectoryExport,
): Array<TrajectoryEntry & { nested: TrajectoryEntry[] }> {
  const controls = trajectory.entries.filter((entry) => entry.kind === "control");
  return controls.map((control) => ({
    ...control,
    nested: trajectory.entries.filter(
      (entry) => entry.kind === "nested" && entry.parentToolCallId === control.toolCallId,
    ),
  }));
}
