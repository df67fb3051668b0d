import { DOUBLE_ZERO } from "@codecell/bridge/v8-shapes";
import {
  type JsonValue,
  TRAJECTORY_FORMAT,
  type TrajectoryEntry,
  type TrajectoryExport,
  type TruncatedInput,
} from "@codecell/contract";
import { EntryGroup, SessionLog, STATUSES } from "./trajectory-log.js";

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

// What an entry costs besides its input, error and notes: ids, tool, status and timestamps.
const ENTRY_OVERHEAD_BYTES = 256;
const PREVIEW_CHARS = 512;

// Byte counts start as DOUBLE_ZERO (@codecell/bridge/v8-shapes). They are summed from Float64Array slots, which
// V8's interpreter reads as heap numbers: a count field that started as the small integer 0 became a
// double when eviction began, and that change replaced the hidden classes (maps) of every log, which
// threw the nested-call path's optimized code away in the middle of a session.

/** The recorder's handle on one entry: its log and its number there. */
export class TrajectoryHandle {
  constructor(
    readonly log: SessionLog,
    readonly entry: number,
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
 * size) and keeps that text; everything else on the hot path is constant work. Entries become
 * `TrajectoryEntry` objects only when they are read.
 */
export class TrajectoryRecorder {
  readonly #logs = new Map<string, SessionLog>();
  readonly #limits: TrajectoryLimits;
  #totalBytes = DOUBLE_ZERO;
  #seq = 0;
  /** The log written last: a busy session is looked up once, not per call. */
  #lastLog: SessionLog | null = null;

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

  /** Starts an entry of any kind (the model's exec and wait calls). */
  start(
    sessionId: string,
    entry: Pick<
      TrajectoryEntry,
      "kind" | "toolCallId" | "parentToolCallId" | "tool" | "codeModeRunId" | "via"
    > & {
      input?: JsonValue;
    },
  ): TrajectoryHandle {
    const group = new EntryGroup(
      entry.kind,
      entry.tool,
      entry.parentToolCallId,
      entry.codeModeRunId,
      entry.via,
      false,
    );
    return this.#append(this.#log(sessionId), group, entry.toolCallId, entry.input, Date.now());
  }

  /**
   * Starts a nested call's entry; its toolCallId is `<parentToolCallId>/<requestId>`. `startedAt` (epoch
   * ms) is the time the caller already took for the call, so a call reads the clock once to start.
   */
  startNested(
    sessionId: string,
    parentToolCallId: string,
    codeModeRunId: string,
    tool: string,
    via: string,
    requestId: string,
    input: JsonValue | undefined,
    startedAt: number,
  ): TrajectoryHandle {
    const log = this.#log(sessionId);
    return this.#append(
      log,
      log.nestedGroup(tool, parentToolCallId, codeModeRunId, via),
      requestId,
      input,
      startedAt,
    );
  }

  #append(
    log: SessionLog,
    group: EntryGroup,
    id: string,
    input: JsonValue | undefined,
    startedAt: number,
  ): TrajectoryHandle {
    let inputJson: string | undefined;
    let size = ENTRY_OVERHEAD_BYTES;
    if (input !== undefined) {
      inputJson = log.sharedInput(this.#boundedJson(input));
      size += utf8Bytes(inputJson);
    }
    const entry = log.append(++this.#seq, group, id, inputJson, size, startedAt);
    this.#totalBytes += size;
    this.#trim(log);
    return new TrajectoryHandle(log, entry);
  }

  /** Sets the run id or the yield reason of an entry once they are known. */
  annotate(handle: TrajectoryHandle, fields: { codeModeRunId?: string; yieldReason?: string }): void {
    const { log, entry } = handle;
    if (!log.holds(entry)) return;
    const slot = log.slot(entry);
    if (fields.codeModeRunId !== undefined) {
      // A group may be shared: the entry gets one of its own, and its whole id.
      const group = log.groups[slot]!;
      log.ids[slot] = log.toolCallId(slot);
      log.groups[slot] = new EntryGroup(
        group.kind,
        group.tool,
        group.parentToolCallId,
        fields.codeModeRunId,
        group.via,
        false,
      );
    }
    if (fields.yieldReason !== undefined) {
      log.extraOf(slot).yieldReason = fields.yieldReason;
      this.#grow(log, slot, utf8Bytes(fields.yieldReason));
    }
  }

  end(
    handle: TrajectoryHandle,
    status: TrajectoryEntry["status"],
    failure?: { code?: string; error: string },
  ): void {
    const { log, entry } = handle;
    // An entry pushed out (or of a forgotten session) is no longer read.
    if (!log.holds(entry)) return;
    const slot = log.slot(entry);
    log.statuses[slot] = STATUSES.indexOf(status);
    log.endedAt[slot] = Date.now();
    if (failure) {
      const extra = log.extraOf(slot);
      if (failure.code) extra.code = failure.code;
      extra.error = failure.error.length > 2000 ? `${failure.error.slice(0, 2000)}…` : failure.error;
      this.#grow(log, slot, utf8Bytes(extra.error));
    }
  }

  /**
   * Ends the `waiting` entry of a nested call that was handed out of the host (NestedToolCall.handOut)
   * once the resumed run gets its outcome: it reads completed or failed, like any other call. Nothing
   * happens when this process did not record the hand-out (another replica did) or it was pushed out.
   */
  settleHandedOut(
    sessionId: string,
    codeModeRunId: string,
    requestId: string,
    failure?: { code?: string; error: string },
  ): void {
    const log = this.#logs.get(sessionId);
    if (!log) return;
    const waiting = STATUSES.indexOf("waiting");
    for (let entry = log.tail - 1; entry >= log.head; entry--) {
      const slot = log.slot(entry);
      const group = log.groups[slot]!;
      if (group.kind !== "nested" || group.codeModeRunId !== codeModeRunId) continue;
      if (log.statuses[slot] !== waiting || !log.toolCallId(slot).endsWith(`/${requestId}`)) continue;
      this.end(new TrajectoryHandle(log, entry), failure ? "failed" : "completed", failure);
      return;
    }
  }

  /** At most 20 notes of 500 characters per entry: hosts annotate decisions, not logs. */
  note(handle: TrajectoryHandle, text: string): void {
    const { log, entry } = handle;
    if (!log.holds(entry)) return;
    const slot = log.slot(entry);
    const extra = log.extraOf(slot);
    extra.notes ??= [];
    if (extra.notes.length >= 20) return;
    const line = String(text).slice(0, 500);
    extra.notes.push(line);
    this.#grow(log, slot, utf8Bytes(line));
  }

  /** Replaces an entry's input (already bounded and redacted by the caller) from what was recorded. */
  updateInput(handle: TrajectoryHandle, update: (recorded: JsonValue | undefined) => JsonValue): void {
    const { log, entry } = handle;
    if (!log.holds(entry)) return;
    const slot = log.slot(entry);
    const before = log.inputs[slot];
    const next = this.#boundedJson(
      update(before === undefined ? undefined : (JSON.parse(before) as JsonValue)),
    );
    log.inputs[slot] = next;
    this.#grow(log, slot, utf8Bytes(next) - (before === undefined ? 0 : utf8Bytes(before)));
  }

  /** Frees a session's log; entries still running are no longer kept or counted. */
  forget(sessionId: string): boolean {
    const log = this.#logs.get(sessionId);
    if (!log) return false;
    log.live = false;
    this.#totalBytes -= log.bytes;
    this.#logs.delete(sessionId);
    if (this.#lastLog === log) this.#lastLog = null;
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
    const entries: TrajectoryEntry[] = [];
    const keep = (log: SessionLog, entry: number): void => {
      const slot = log.slot(entry);
      const group = log.groups[slot]!;
      if (
        filter?.parentToolCallId &&
        group.parentToolCallId !== filter.parentToolCallId &&
        log.toolCallId(slot) !== filter.parentToolCallId
      ) {
        return;
      }
      if (filter?.codeModeRunId && group.codeModeRunId !== filter.codeModeRunId) return;
      entries.push(log.toEntry(entry));
    };
    if (filter?.sessionId !== undefined) {
      const log = this.#logs.get(filter.sessionId);
      if (log) for (let entry = log.head; entry < log.tail; entry++) keep(log, entry);
      return { format: TRAJECTORY_FORMAT, entries };
    }
    const all: Array<{ log: SessionLog; entry: number; seq: number }> = [];
    for (const log of this.#logs.values()) {
      for (let entry = log.head; entry < log.tail; entry++) {
        all.push({ log, entry, seq: log.seqs[log.slot(entry)]! });
      }
    }
    all.sort((a, b) => a.seq - b.seq);
    for (const { log, entry } of all) keep(log, entry);
    return { format: TRAJECTORY_FORMAT, entries };
  }

  #log(sessionId: string): SessionLog {
    const last = this.#lastLog;
    if (last !== null && last.sessionId === sessionId) return last;
    let log = this.#logs.get(sessionId);
    if (!log) {
      log = new SessionLog(sessionId);
      this.#logs.set(sessionId, log);
    }
    this.#lastLog = log;
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

  /** A kept entry (the caller checked) grows by `bytes`. */
  #grow(log: SessionLog, slot: number, bytes: number): void {
    log.sizes[slot] = log.sizes[slot]! + bytes;
    log.bytes += bytes;
    this.#totalBytes += bytes;
  }

  #trim(log: SessionLog): void {
    const limits = this.#limits;
    // Keep the newest entry even when it alone passes the cap (its input is bounded anyway).
    while (
      log.size > 1 &&
      (log.bytes > limits.maxBytesPerSession || log.size > limits.maxEntriesPerSession)
    ) {
      this.#totalBytes -= log.evictOldest();
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
}
