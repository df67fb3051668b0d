// A run's record as a Redis hash: the field table the Lua scripts share, its encoding, and its signatures and their check.
import { CodeModeError } from "@codecell/contract";
import type { BackendPendingCall, BackendRecord, ReplaceRequest } from "./backend.js";
import { callEntries, deriveRecordKey, outcomeMac, recordMac, SCOPE_FIELDS, sameMac } from "./record-mac.js";
import { MIN_SNAPSHOT_KEY_BYTES as MIN_SECRET_BYTES } from "./snapshot-key.js";
import type { RunScope } from "./types.js";

/** The call data that is signed and stored per pending call (the owner and outcome live apart). */
export type CallJson = { position: number; toolId: string; startedAt: string };

type RecordParts = {
  snapshot: Uint8Array;
  outputJson: string;
  telemetryJson: string;
  hostStateJson: string | null;
};

/** A record read back from Redis, and whether every signature on it verified. */
export type DecodedRecord = { record: BackendRecord; intact: boolean };

function secretBytes(secret: unknown): Buffer {
  const bytes =
    typeof secret === "string"
      ? Buffer.from(secret, "utf8")
      : secret instanceof Uint8Array
        ? Buffer.from(secret)
        : null;
  if (bytes === null || bytes.byteLength < MIN_SECRET_BYTES) {
    throw new CodeModeError(
      "invalid_config",
      `Redis snapshot backend: secret is required and must be at least ${MIN_SECRET_BYTES} bytes, shared by every replica ` +
        "(it signs each record so a record changed in Redis is never restored). Generate one with `openssl rand -base64 48`.",
    );
  }
  return bytes;
}

/**
 * Encodes records into the hash fields of `redis-scripts` and decodes them, signing what it writes and
 * checking what it reads with a key derived from the deployment's shared secret.
 */
export class RedisRecordCodec {
  readonly #secret: Buffer;

  constructor(secret: unknown) {
    // A key of its own, derived from the shared secret: the sandbox signs snapshots with the secret
    // itself, and one key should not serve two purposes.
    this.#secret = deriveRecordKey(secretBytes(secret), "codecell redis records 1");
  }

  #recordMac(
    runId: string,
    scope: RunScope,
    parts: RecordParts,
    calls: ReadonlyArray<readonly [string, string]>,
  ): Buffer {
    return recordMac(this.#secret, "codecell-run-1", { runId, scope, ...parts }, calls);
  }

  outcomeMac(runId: string, callId: string, outcomeJson: string, settledAt: string): Buffer {
    return outcomeMac(this.#secret, "codecell-outcome-1", runId, callId, outcomeJson, settledAt);
  }

  /** Whether a recorded outcome's stored MAC verifies. */
  outcomeIntact(
    runId: string,
    callId: string,
    outcomeJson: string,
    settledAt: string,
    mac: string | undefined,
  ) {
    return sameMac(this.outcomeMac(runId, callId, outcomeJson, settledAt), mac);
  }

  /** The field/value list of a new record's hash, owned by `replicaId`. */
  insertFields(
    record: BackendRecord,
    replicaId: string,
    tombstoneMs: number,
  ): Array<string | number | Buffer> {
    const calls = callEntries(record.pendingCalls);
    const mac = this.#recordMac(record.runId, record.scope, record, calls);
    const fields: Array<string | number | Buffer> = [
      "st",
      "waiting",
      ...SCOPE_FIELDS.flatMap(([field, short]) => [short, record.scope[field]]),
      "snap",
      Buffer.from(record.snapshot.buffer, record.snapshot.byteOffset, record.snapshot.byteLength),
      "out",
      record.outputJson,
      "tel",
      record.telemetryJson,
      "ca",
      record.createdAt,
      "ua",
      record.updatedAt,
      "ex",
      record.expiresAt,
      "by",
      record.bytes,
      "rc",
      record.resumeCount,
      "lu",
      0,
      "ret",
      tombstoneMs,
      "mac",
      mac.toString("base64"),
    ];
    if (record.hostStateJson !== null) fields.push("hs", record.hostStateJson);
    record.pendingCalls.forEach((call, index) => {
      const [callId, json] = calls[index]!;
      fields.push(`c:${callId}`, json, `o:${callId}`, replicaId);
      if (call.outcomeJson !== null) {
        const settledAt = call.settledAt ?? "";
        fields.push(
          `r:${callId}`,
          call.outcomeJson,
          `a:${callId}`,
          settledAt,
          `m:${callId}`,
          this.outcomeMac(record.runId, callId, call.outcomeJson, settledAt).toString("base64"),
        );
      }
    });
    return fields;
  }

  /** The scope of a run from its hash's scope fields, as `hmget(key, ...scopeFieldNames())` answers them. */
  static scopeFieldNames(): string[] {
    return SCOPE_FIELDS.map(([, short]) => short);
  }

  static scopeOf(head: ReadonlyArray<string | null>): RunScope {
    return Object.fromEntries(SCOPE_FIELDS.map(([field], index) => [field, head[index] ?? ""])) as RunScope;
  }

  /** The per-call arguments and the replaced fields of a re-suspended record of `scope`. */
  replaceArgs(
    request: ReplaceRequest,
    scope: RunScope,
  ): { callArgs: string[]; parts: Array<string | number | Buffer> } {
    const calls = callEntries(request.pendingCalls);
    const mac = this.#recordMac(request.runId, scope, request, calls);
    const callArgs = request.pendingCalls.flatMap((call, index) => {
      const settledAt = call.settledAt ?? "";
      return [
        call.callId,
        calls[index]![1],
        call.outcomeJson ?? "",
        settledAt,
        call.outcomeJson === null
          ? ""
          : this.outcomeMac(request.runId, call.callId, call.outcomeJson, settledAt).toString("base64"),
      ];
    });
    const parts: Array<string | number | Buffer> = [
      "snap",
      Buffer.from(request.snapshot.buffer, request.snapshot.byteOffset, request.snapshot.byteLength),
      "out",
      request.outputJson,
      "tel",
      request.telemetryJson,
      "ua",
      request.updatedAt,
      "ex",
      request.expiresAt,
      "mac",
      mac.toString("base64"),
    ];
    if (request.hostStateJson !== null) parts.push("hs", request.hostStateJson);
    return { callArgs, parts };
  }

  /** A run's record from its hash as a flat field/value list, with whether its signatures verified. */
  decode(runId: string, flat: Buffer[]): DecodedRecord {
    const hash = new Map<string, Buffer>();
    for (let index = 0; index + 1 < flat.length; index += 2)
      hash.set(flat[index]!.toString("utf8"), flat[index + 1]!);
    const text = (field: string) => hash.get(field)?.toString("utf8");
    const number = (field: string) => Number(text(field) ?? 0);
    const scope = Object.fromEntries(
      SCOPE_FIELDS.map(([field, short]) => [field, text(short) ?? ""]),
    ) as RunScope;
    const callIds = [...hash.keys()].filter((field) => field.startsWith("c:")).map((field) => field.slice(2));
    const calls = callIds
      .map((callId) => ({ callId, json: text(`c:${callId}`)! }))
      .map((entry) => ({ ...entry, call: JSON.parse(entry.json) as CallJson }))
      .sort((a, b) => a.call.position - b.call.position);
    const snapshotBuffer = hash.get("snap") ?? Buffer.alloc(0);
    const parts: RecordParts = {
      snapshot: new Uint8Array(snapshotBuffer.buffer, snapshotBuffer.byteOffset, snapshotBuffer.byteLength),
      outputJson: text("out") ?? "",
      telemetryJson: text("tel") ?? "",
      hostStateJson: text("hs") ?? null,
    };
    let intact = sameMac(
      this.#recordMac(
        runId,
        scope,
        parts,
        calls.map(({ callId, json }) => [callId, json]),
      ),
      text("mac"),
    );
    const pendingCalls: BackendPendingCall[] = calls.map(({ callId, call }) => {
      const outcomeJson = text(`r:${callId}`) ?? null;
      const settledAt = text(`a:${callId}`) ?? null;
      if (
        outcomeJson !== null &&
        !sameMac(this.outcomeMac(runId, callId, outcomeJson, settledAt ?? ""), text(`m:${callId}`))
      ) {
        intact = false;
      }
      return { callId, toolId: call.toolId, startedAt: call.startedAt, outcomeJson, settledAt };
    });
    return {
      intact,
      record: {
        runId,
        scope,
        ...parts,
        pendingCalls,
        createdAt: number("ca"),
        updatedAt: number("ua"),
        expiresAt: number("ex"),
        bytes: number("by"),
        resumeCount: number("rc"),
      },
    };
  }
}
