import { DOUBLE_ZERO } from "@codecell/bridge/v8-shapes";
import type { JsonValue, TrajectoryEntry } from "@codecell/contract";

/**
 * How a session's trajectory is held in memory: entries in a ring of columns, the fields consecutive
 * entries share in one group. The recorder (trajectory.ts) decides what is recorded and what is pushed
 * out; this file only stores and reads entries back.
 */

// Byte counts start as DOUBLE_ZERO (@codecell/bridge); see trajectory.ts.

/** An entry's status as stored (its index here). */
export const STATUSES: readonly TrajectoryEntry["status"][] = ["running", "completed", "waiting", "failed"];
const RUNNING = 0;

/**
 * What consecutive entries share: a loop's nested calls under one exec have the same kind, tool, parent,
 * run and route, so they point at one object instead of holding five fields each. A nested entry's
 * toolCallId is `<parent>/<request id>`: the entry keeps the request id, and the prefix lives here.
 */
export class EntryGroup {
  readonly idPrefix: string;

  constructor(
    readonly kind: TrajectoryEntry["kind"],
    readonly tool: string,
    readonly parentToolCallId: string | undefined,
    readonly codeModeRunId: string | undefined,
    readonly via: string | undefined,
    nestedIds: boolean,
  ) {
    this.idPrefix = nestedIds ? `${parentToolCallId}/` : "";
  }
}

/** The fields few entries have (a yield's reason, a failure, an executor's notes). */
type EntryExtra = { yieldReason?: string; code?: string; error?: string; notes?: string[] };

/** How many recently used groups a log compares a new nested entry against. */
const RECENT_GROUPS = 8;

/**
 * One session's entries, oldest first, in a ring of columns: numbers in typed arrays, and four arrays
 * of references (the shared group, the id, the input's JSON, the rare extras). Every nested call keeps
 * its entry until newer ones push it out (10,000 by default), so whatever an entry is made of is copied
 * to the old generation and marked there on every full collection: here that is the id and input
 * strings (the input's text is shared with the previous entry when it reads the same), not an object
 * of fifteen fields, two strings and two timestamps. Entries are numbered from the log's first; a
 * number below `head` was pushed out.
 */
export class SessionLog {
  live = true;
  bytes = DOUBLE_ZERO;
  /** Sequence number of its latest entry (the total cap frees the sessions written to longest ago). */
  lastWrite = 0;
  /** Number of the oldest kept entry; `tail` is the next one's. */
  head = 0;
  tail = 0;
  #mask: number;
  seqs: Float64Array;
  startedAt: Float64Array;
  /** NaN while the entry runs. */
  endedAt: Float64Array;
  sizes: Float64Array;
  statuses: Uint8Array;
  groups: Array<EntryGroup | undefined>;
  ids: Array<string | undefined>;
  inputs: Array<string | undefined>;
  extras: Array<EntryExtra | undefined>;
  readonly #recentGroups: EntryGroup[] = [];
  #nextRecent = 0;
  /** The latest input's JSON, handed to the next entry whose input reads the same. */
  #lastInput: string | undefined = undefined;

  constructor(
    readonly sessionId: string,
    capacity = 8,
  ) {
    this.#mask = capacity - 1;
    this.seqs = new Float64Array(capacity);
    this.startedAt = new Float64Array(capacity);
    this.endedAt = new Float64Array(capacity);
    this.sizes = new Float64Array(capacity);
    this.statuses = new Uint8Array(capacity);
    this.groups = new Array(capacity).fill(undefined);
    this.ids = new Array(capacity).fill(undefined);
    this.inputs = new Array(capacity).fill(undefined);
    this.extras = new Array(capacity).fill(undefined);
  }

  get size(): number {
    return this.tail - this.head;
  }

  slot(entry: number): number {
    return entry & this.#mask;
  }

  /** The entry is still kept (not pushed out, its session not forgotten). */
  holds(entry: number): boolean {
    return this.live && entry >= this.head && entry < this.tail;
  }

  append(
    seq: number,
    group: EntryGroup,
    id: string,
    inputJson: string | undefined,
    bytes: number,
    startedAt: number,
  ): number {
    if (this.tail - this.head > this.#mask) this.#grow();
    const entry = this.tail++;
    const slot = entry & this.#mask;
    this.seqs[slot] = seq;
    this.startedAt[slot] = startedAt;
    this.endedAt[slot] = Number.NaN;
    this.sizes[slot] = bytes;
    this.statuses[slot] = RUNNING;
    this.groups[slot] = group;
    this.ids[slot] = id;
    this.inputs[slot] = inputJson;
    this.extras[slot] = undefined;
    this.bytes += bytes;
    this.lastWrite = seq;
    return entry;
  }

  /** Pushes the oldest entry out; what it held in bytes. */
  evictOldest(): number {
    const slot = this.head++ & this.#mask;
    const bytes = this.sizes[slot]!;
    this.bytes -= bytes;
    this.groups[slot] = undefined;
    this.ids[slot] = undefined;
    this.inputs[slot] = undefined;
    this.extras[slot] = undefined;
    return bytes;
  }

  /** A group equal to one of the last few, or a new one remembered in their place. */
  nestedGroup(tool: string, parentToolCallId: string, codeModeRunId: string, via: string): EntryGroup {
    const recent = this.#recentGroups;
    for (let index = 0; index < recent.length; index++) {
      const group = recent[index]!;
      if (
        group.tool === tool &&
        group.parentToolCallId === parentToolCallId &&
        group.codeModeRunId === codeModeRunId &&
        group.via === via
      ) {
        return group;
      }
    }
    const group = new EntryGroup("nested", tool, parentToolCallId, codeModeRunId, via, true);
    recent[this.#nextRecent] = group;
    this.#nextRecent = (this.#nextRecent + 1) % RECENT_GROUPS;
    return group;
  }

  /** The previous input's string when this one reads the same: one string kept for both. */
  sharedInput(json: string): string {
    if (json === this.#lastInput) return this.#lastInput;
    this.#lastInput = json;
    return json;
  }

  #grow(): void {
    const capacity = (this.#mask + 1) * 2;
    const mask = capacity - 1;
    const seqs = new Float64Array(capacity);
    const startedAt = new Float64Array(capacity);
    const endedAt = new Float64Array(capacity);
    const sizes = new Float64Array(capacity);
    const statuses = new Uint8Array(capacity);
    const groups = new Array<EntryGroup | undefined>(capacity).fill(undefined);
    const ids = new Array<string | undefined>(capacity).fill(undefined);
    const inputs = new Array<string | undefined>(capacity).fill(undefined);
    const extras = new Array<EntryExtra | undefined>(capacity).fill(undefined);
    for (let entry = this.head; entry < this.tail; entry++) {
      const from = entry & this.#mask;
      const to = entry & mask;
      seqs[to] = this.seqs[from]!;
      startedAt[to] = this.startedAt[from]!;
      endedAt[to] = this.endedAt[from]!;
      sizes[to] = this.sizes[from]!;
      statuses[to] = this.statuses[from]!;
      groups[to] = this.groups[from];
      ids[to] = this.ids[from];
      inputs[to] = this.inputs[from];
      extras[to] = this.extras[from];
    }
    this.#mask = mask;
    this.seqs = seqs;
    this.startedAt = startedAt;
    this.endedAt = endedAt;
    this.sizes = sizes;
    this.statuses = statuses;
    this.groups = groups;
    this.ids = ids;
    this.inputs = inputs;
    this.extras = extras;
  }

  /** The entry's rare fields, made the first time one is set. */
  extraOf(slot: number): EntryExtra {
    let extra = this.extras[slot];
    if (extra === undefined) {
      extra = {};
      this.extras[slot] = extra;
    }
    return extra;
  }

  toolCallId(slot: number): string {
    return this.groups[slot]!.idPrefix + this.ids[slot]!;
  }

  /** The entry as users read it, made when it is read. */
  toEntry(entry: number): TrajectoryEntry {
    const slot = entry & this.#mask;
    const group = this.groups[slot]!;
    const result: TrajectoryEntry = {
      kind: group.kind,
      toolCallId: group.idPrefix + this.ids[slot]!,
      tool: group.tool,
      status: STATUSES[this.statuses[slot]!]!,
      startedAt: new Date(this.startedAt[slot]!).toISOString(),
    };
    if (group.parentToolCallId !== undefined) result.parentToolCallId = group.parentToolCallId;
    if (group.codeModeRunId !== undefined) result.codeModeRunId = group.codeModeRunId;
    if (group.via !== undefined) result.via = group.via;
    const inputJson = this.inputs[slot];
    if (inputJson !== undefined) result.input = JSON.parse(inputJson) as JsonValue;
    const extra = this.extras[slot];
    if (extra?.yieldReason !== undefined) result.yieldReason = extra.yieldReason;
    if (extra?.code !== undefined) result.code = extra.code;
    if (extra?.error !== undefined) result.error = extra.error;
    if (extra?.notes !== undefined) result.notes = [...extra.notes];
    const endedAt = this.endedAt[slot]!;
    if (!Number.isNaN(endedAt)) {
      result.endedAt = new Date(endedAt).toISOString();
      result.durationMs = endedAt - this.startedAt[slot]!;
    }
    return result;
  }
}
