import type { JsonValue, TrajectoryEntry } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { type TrajectoryHandle, type TrajectoryLimits, TrajectoryRecorder } from "../src/trajectory.js";

/**
 * The recorder keeps entries in columns and makes them into objects when read. This model keeps each
 * entry as the object a user reads, with the same bounds, so whatever the recorder returns can be
 * compared against the obvious version of the contract.
 */
class ModelRecorder {
  readonly logs = new Map<
    string,
    {
      entries: Array<{ entry: TrajectoryEntry; bytes: number; seq: number }>;
      live: boolean;
      lastWrite: number;
    }
  >();
  totalBytes = 0;
  seq = 0;

  constructor(readonly limits: TrajectoryLimits) {}

  start(sessionId: string, entry: TrajectoryEntry): { log: ModelLog; record: ModelRecord } {
    let log = this.logs.get(sessionId);
    if (!log) {
      log = { entries: [], live: true, lastWrite: 0 };
      this.logs.set(sessionId, log);
    }
    const record = {
      entry,
      bytes: 256 + (entry.input === undefined ? 0 : bytesOf(json(entry.input))),
      seq: ++this.seq,
    };
    log.lastWrite = record.seq;
    log.entries.push(record);
    this.totalBytes += record.bytes;
    const logBytes = () => log.entries.reduce((sum, kept) => sum + kept.bytes, 0);
    while (
      log.entries.length > 1 &&
      (logBytes() > this.limits.maxBytesPerSession || log.entries.length > this.limits.maxEntriesPerSession)
    ) {
      this.totalBytes -= log.entries.shift()!.bytes;
    }
    while (this.totalBytes > this.limits.maxTotalBytes) {
      let idlest: [string, ModelLog] | undefined;
      for (const [id, other] of this.logs) {
        if (other !== log && (idlest === undefined || other.lastWrite < idlest[1].lastWrite))
          idlest = [id, other];
      }
      if (!idlest) break;
      this.forget(idlest[0]);
    }
    return { log, record };
  }

  kept(handle: { log: ModelLog; record: ModelRecord }): boolean {
    return handle.log.live && handle.log.entries.includes(handle.record);
  }

  grow(handle: { log: ModelLog; record: ModelRecord }, bytes: number): void {
    handle.record.bytes += bytes;
    this.totalBytes += bytes;
  }

  forget(sessionId: string): void {
    const log = this.logs.get(sessionId);
    if (!log) return;
    log.live = false;
    this.totalBytes -= log.entries.reduce((sum, kept) => sum + kept.bytes, 0);
    this.logs.delete(sessionId);
  }

  export(filter: {
    sessionId?: string;
    parentToolCallId?: string;
    codeModeRunId?: string;
  }): TrajectoryEntry[] {
    const records =
      filter.sessionId !== undefined
        ? (this.logs.get(filter.sessionId)?.entries ?? [])
        : [...this.logs.values()].flatMap((log) => log.entries).sort((a, b) => a.seq - b.seq);
    return records
      .map((record) => record.entry)
      .filter(
        (entry) =>
          (!filter.parentToolCallId ||
            entry.parentToolCallId === filter.parentToolCallId ||
            entry.toolCallId === filter.parentToolCallId) &&
          (!filter.codeModeRunId || entry.codeModeRunId === filter.codeModeRunId),
      );
  }
}
type ModelLog = ModelRecorder["logs"] extends Map<string, infer Log> ? Log : never;
type ModelRecord = ModelLog["entries"][number];

const json = (value: JsonValue) => JSON.stringify(value);
const bytesOf = (text: string) => Buffer.byteLength(text, "utf8");
/** An input as the trajectory keeps it: whole, or a `$truncated` marker past `maxInputBytes`. */
const bounded = (input: JsonValue, maxInputBytes: number): JsonValue => {
  const text = json(input);
  return bytesOf(text) <= maxInputBytes
    ? input
    : { $truncated: { bytes: bytesOf(text), preview: text.slice(0, 512) } };
};

/** A small deterministic generator, so a failure can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  return (below: number) => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state % below;
  };
}

/** What the recorder returned, without the clock's values (checked separately). */
function timeless(entries: TrajectoryEntry[]) {
  return entries.map(({ startedAt, endedAt, durationMs, ...rest }) => {
    expect(Number.isNaN(Date.parse(startedAt))).toBe(false);
    if (endedAt !== undefined) expect(durationMs).toBe(Date.parse(endedAt) - Date.parse(startedAt));
    return { ...rest, ended: endedAt !== undefined };
  });
}

describe("the trajectory recorder's columnar store", () => {
  it("returns exactly what a plain list of entries under the same bounds returns, over random histories", () => {
    for (let seed = 1; seed <= 40; seed++) {
      const next = random(seed);
      const limits: TrajectoryLimits = {
        maxEntriesPerSession: 3 + next(40),
        maxBytesPerSession: 2_000 + next(8_000),
        maxInputBytes: 200 + next(400),
        maxTotalBytes: 6_000 + next(20_000),
      };
      const recorder = new TrajectoryRecorder(limits);
      const model = new ModelRecorder(limits);
      const handles: Array<{ real: TrajectoryHandle; model: { log: ModelLog; record: ModelRecord } }> = [];
      const sessions = ["s1", "s2", "s3"];
      const tools = ["core:host:a", "plugin:p:b", "mcp:m:c"];
      for (let step = 0; step < 600; step++) {
        const sessionId = sessions[next(sessions.length)]!;
        const op = next(100);
        if (op < 12) {
          const toolCallId = `call-${step}`;
          const input: JsonValue = { language: "javascript", code: "x".repeat(next(300)) };
          const codeModeRunId = next(3) === 0 ? undefined : `run-${next(4)}`;
          const entry: TrajectoryEntry = {
            kind: "control",
            toolCallId,
            tool: next(2) ? "exec" : "wait",
            status: "running",
            startedAt: "",
            ...(codeModeRunId ? { codeModeRunId } : {}),
            input: bounded(input, limits.maxInputBytes),
          };
          const real = recorder.start(sessionId, {
            kind: "control",
            toolCallId,
            tool: entry.tool,
            codeModeRunId,
            input,
          });
          handles.push({ real, model: model.start(sessionId, entry) });
        } else if (op < 60) {
          const parent = `call-${next(step + 1)}`;
          const runId = `run-${next(4)}`;
          const tool = tools[next(tools.length)]!;
          const via = next(2) ? "tools.call" : "namespace";
          const requestId = String(step);
          // Repeated inputs (a loop's) and varied ones, small and past maxInputBytes.
          const size = next(4);
          const input: JsonValue =
            size === 0
              ? { value: 1 }
              : size === 3
                ? { blob: "y".repeat(1_000 + next(2_000)) }
                : { value: step };
          const kept = bounded(input, limits.maxInputBytes);
          const entry: TrajectoryEntry = {
            kind: "nested",
            toolCallId: `${parent}/${requestId}`,
            parentToolCallId: parent,
            tool,
            codeModeRunId: runId,
            via,
            status: "running",
            startedAt: "",
            input: kept,
          };
          const real = recorder.startNested(
            sessionId,
            parent,
            runId,
            tool,
            via,
            requestId,
            input,
            Date.now(),
          );
          handles.push({ real, model: model.start(sessionId, entry) });
        } else if (op < 85 && handles.length > 0) {
          const handle = handles[next(handles.length)]!;
          const failed = next(3) === 0;
          const status = failed ? "failed" : (["completed", "waiting"] as const)[next(2)]!;
          const error = failed ? `boom ${"z".repeat(next(2_500))}` : undefined;
          const code = failed && next(2) ? "nested_tool_failed" : undefined;
          recorder.end(handle.real, status, error ? { ...(code ? { code } : {}), error } : undefined);
          if (model.kept(handle.model)) {
            const { entry } = handle.model.record;
            entry.status = status;
            entry.endedAt = "set";
            if (code) entry.code = code;
            if (error) {
              entry.error = error.length > 2000 ? `${error.slice(0, 2000)}…` : error;
              model.grow(handle.model, bytesOf(entry.error));
            }
          }
        } else if (op < 90 && handles.length > 0) {
          const handle = handles[next(handles.length)]!;
          const text = `approved ${"n".repeat(next(700))}`;
          recorder.note(handle.real, text);
          if (model.kept(handle.model)) {
            const { entry } = handle.model.record;
            entry.notes ??= [];
            if (entry.notes.length < 20) {
              entry.notes.push(text.slice(0, 500));
              model.grow(handle.model, bytesOf(text.slice(0, 500)));
            }
          }
        } else if (op < 94 && handles.length > 0) {
          const handle = handles[next(handles.length)]!;
          const codeModeRunId = `run-${next(6)}`;
          const yieldReason = next(2) ? `because ${step}` : undefined;
          recorder.annotate(handle.real, { codeModeRunId, ...(yieldReason ? { yieldReason } : {}) });
          if (model.kept(handle.model)) {
            const { entry } = handle.model.record;
            entry.codeModeRunId = codeModeRunId;
            if (yieldReason) {
              entry.yieldReason = yieldReason;
              model.grow(handle.model, bytesOf(yieldReason));
            }
          }
        } else if (op < 96 && handles.length > 0) {
          const handle = handles[next(handles.length)]!;
          recorder.updateInput(handle.real, (recorded) => ({
            before: recorded ?? null,
            detected: "typescript",
          }));
          if (model.kept(handle.model)) {
            const { entry } = handle.model.record;
            const before = entry.input === undefined ? 0 : bytesOf(json(entry.input));
            const nextInput = { before: entry.input ?? null, detected: "typescript" };
            entry.input = bounded(nextInput, limits.maxInputBytes);
            model.grow(handle.model, bytesOf(json(entry.input)) - before);
          }
        } else if (op < 97) {
          recorder.forget(sessionId);
          model.forget(sessionId);
        }
        if (step % 25 === 0 || step === 599) {
          const filters = [
            {},
            { sessionId },
            { parentToolCallId: `call-${next(step + 1)}` },
            { codeModeRunId: `run-${next(4)}` },
            { sessionId, codeModeRunId: `run-${next(4)}` },
          ];
          for (const filter of filters) {
            const expected = model.export(filter).map(({ startedAt, endedAt, durationMs, ...rest }) => ({
              ...rest,
              ended: endedAt !== undefined,
            }));
            expect(timeless(recorder.export(filter).entries), `seed ${seed} step ${step}`).toEqual(expected);
          }
          expect(recorder.totalBytes, `seed ${seed} step ${step}`).toBe(model.totalBytes);
          expect(recorder.sessionCount).toBe(model.logs.size);
        }
      }
    }
  });

  it("keeps a long session's newest entries in order through many evictions and ring growth", () => {
    const recorder = new TrajectoryRecorder({ maxEntriesPerSession: 1_000 });
    const handles: TrajectoryHandle[] = [];
    for (let index = 0; index < 25_000; index++) {
      const handle = recorder.startNested(
        "s",
        "exec-1",
        "run-1",
        "core:host:inc",
        "tools.call",
        `r${index}`,
        {
          value: index % 3,
        },
        Date.now(),
      );
      recorder.end(handle, "completed");
      handles.push(handle);
    }
    const { entries } = recorder.export({ sessionId: "s" });
    expect(entries).toHaveLength(1_000);
    expect(entries[0]!.toolCallId).toBe("exec-1/r24000");
    expect(entries.at(-1)).toMatchObject({
      kind: "nested",
      toolCallId: "exec-1/r24999",
      parentToolCallId: "exec-1",
      tool: "core:host:inc",
      codeModeRunId: "run-1",
      via: "tools.call",
      input: { value: 24_999 % 3 },
      status: "completed",
    });
    // A handle whose entry was pushed out changes nothing that is kept.
    const before = recorder.totalBytes;
    recorder.end(handles[0]!, "failed", { code: "nested_tool_failed", error: "late" });
    recorder.note(handles[0]!, "late note");
    expect(recorder.totalBytes).toBe(before);
    expect(recorder.export({ sessionId: "s" }).entries.some((entry) => entry.error === "late")).toBe(false);
  });
});
