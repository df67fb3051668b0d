// Type-only: sandbox workers load this module on start-up, so it must not pull in the contract's zod.
import type { CodeModeLanguage, JsonValue, ToolCatalogEntry } from "@codecell/contract";
import { CONSOLE_LEVELS, IMAGE_MIME_TYPES } from "@codecell/contract/errors";
import { isSharedChannelBuffer } from "./shared-channel.js";

/** The JSON surface the engine builds and the trusted prelude installs as guest globals. */
export type GuestSurface = {
  allTools: ToolCatalogEntry[];
  /** `aliases`: other spellings that answer too (non-enumerable), computed once per run. */
  toolFunctions: Array<{ name: string; toolId: string; aliases?: string[] }>;
  mcpServers: Array<{
    identifier: string;
    aliases?: string[];
    tools: Array<{ identifier: string; toolId: string; aliases?: string[] }>;
    resources: boolean;
    prompts: boolean;
  }>;
  /**
   * The virtual declaration files, without their text: `bytes` is the UTF-8 size `API.list` reports, and
   * `API.read` asks the host for the text (an `api` request). A VM no longer carries every server's
   * declarations (tens of KB for a few servers) into each cell, nor into each snapshot.
   */
  apiFiles: Array<{ path: string; description: string; bytes: number }>;
  /** Short spellings of API paths (`memory.d.ts`, `memory`) to every path each can mean. */
  apiShortPaths?: Record<string, string[]>;
  /** Scope JSON; a `{"$codecellCall": "<path>"}` marker becomes an async function. */
  namespaces: Array<{ namespaceId: string; globalName: string; scope: JsonValue }>;
};

export const MCP_OPERATIONS = [
  "call",
  "$api",
  "resources.list",
  "resources.read",
  "prompts.list",
  "prompts.get",
] as const;
export type McpOperation = (typeof MCP_OPERATIONS)[number];

export const STORE_OPERATIONS = ["set", "get", "delete", "keys"] as const;
export type StoreOperation = (typeof STORE_OPERATIONS)[number];

/** What a guest call asks of the host. */
export type HostRequestBody =
  /** `tools.search` (the catalog without MCP), or with `scope: "mcp"` `API.search` (MCP tools only). */
  | { kind: "search"; query: string; options?: { limit?: number }; scope?: "mcp" }
  | { kind: "describe"; target: string }
  | { kind: "call"; target: string; input: JsonValue }
  | { kind: "mcp"; server: string; op: McpOperation; toolId?: string; args: JsonValue[] }
  | { kind: "namespace"; namespaceId: string; path: string; args: JsonValue[] }
  /** `API.read(path)`: the text of one of the surface's API files (the guest checked the path). */
  | { kind: "api"; path: string }
  | { kind: "yield"; reason?: string }
  /**
   * The conversation's stored values: `store(key, value)` is `set` (`delete` when the value has no JSON),
   * `load(key)` is `get`, `store.keys()` is `keys`, `store.delete(key)` is `delete`.
   */
  | { kind: "store"; op: StoreOperation; key?: string; value?: JsonValue };

export type HostRequest = { requestId: string } & HostRequestBody;
export type HostRequestKind = HostRequest["kind"];

export type SandboxLimits = {
  memoryLimitBytes: number;
  maxOutputBytes: number;
  /** Nested tool calls the host runs at once (see `takesToolCallSlot`). */
  maxPendingToolCalls: number;
  /**
   * Tool calls that may wait for a slot beyond `maxPendingToolCalls` (the host queues them in order).
   * The guest is refused only past both; 0 or absent refuses at `maxPendingToolCalls` itself.
   */
  maxQueuedToolCalls?: number;
  maxSnapshotBytes: number;
  /** `image(source)` output items: allowed only when present, each at most `maxBytes` of base64. */
  images?: { maxBytes: number };
};

/**
 * Whether a request is host work that takes one of the run's `maxPendingToolCalls` slots: a tool,
 * namespace or MCP call (MCP resource and prompt reads go to a server too). Catalog answers (search,
 * describe, `$api`) and yields take none.
 */
export function takesToolCallSlot(body: HostRequestBody): boolean {
  if (body.kind === "call" || body.kind === "namespace") return true;
  return body.kind === "mcp" && body.op !== "$api";
}

/**
 * One settled request as it travels to the worker: the value or error already as JSON text. `shallow`:
 * the host knows the text nests far less than MAX_BRIDGE_DEPTH (JsonText.shallow), so the worker skips
 * its depth scan; absent or false, the worker scans as for any text.
 */
export type SettleItem = { requestId: string; ok: boolean; json: string; shallow?: boolean };

/** A compiled `WebAssembly.Module` (typed opaquely: this package's lib has no WebAssembly types). */
export type CompiledWasmModule = object;

const isWasmModule = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  Object.prototype.toString.call(value) === "[object WebAssembly.Module]";

/** Host to worker. */
export type HostToWorkerMessage =
  | {
      type: "init";
      module: CompiledWasmModule;
      snapshotSecret: string | null;
      /**
       * The host's doorbell (shared memory): index 0 goes up after every message the host posts, so a
       * worker waiting synchronously for a quick host result (Atomics.wait) wakes and takes it with
       * `receiveMessageOnPort`, without a turn of its event loop. Absent: the worker only listens.
       */
      doorbell?: Int32Array;
      /**
       * The shared channel of this worker (see shared-channel.ts): quick settles and the answers to
       * them cross through it while the other side is spinning for them. Absent: the port only.
       */
      channel?: SharedArrayBuffer;
      /**
       * The guest prelude's bytecode shipped in the sandbox package, with the source it was compiled
       * from, when the host has checked it against the wasm it runs. The worker takes it only when the
       * source is exactly its own prelude's; otherwise (or absent) it compiles the prelude itself.
       * `image`: the image of a fresh VM that evaluated that bytecode, checked by the host the same way,
       * which the worker makes its VMs of the image's memory limit from (the sandbox's vm-image.js reads it
       * and refuses one whose layout does not add up).
       */
      prelude?: { source: string; bytecode: Uint8Array; image?: Uint8Array } | null;
      /**
       * Random bytes from the host for the worker's QuickJS VMs (WASI `random_get`: 4 bytes each VM),
       * each used once, so a fresh worker thread need not load Node's crypto (tens of ms there, on the
       * way to the first cell); once they run out, the worker takes its own. Absent: its own at once.
       */
      entropy?: Uint8Array;
    }
  | {
      type: "start";
      runId: string;
      /** The cell as the model wrote it: the worker checks and transpiles it, off the host's thread. */
      code: string;
      language: CodeModeLanguage;
      surface: string;
      limits: SandboxLimits;
      deadlineAt: number;
      /**
       * When set, the worker ignores `deadlineAt` while it gets the VM ready, then gives the cell this
       * many ms from the moment it starts evaluating, and reports that deadline in a `started` message.
       */
      timeoutMs?: number;
      signal: Int32Array;
    }
  | {
      type: "restore";
      runId: string;
      snapshot: Uint8Array;
      limits: SandboxLimits;
      deadlineAt: number;
      signal: Int32Array;
    }
  | { type: "settle"; runId: string; items: SettleItem[]; deadlineAt: number }
  | { type: "suspend"; runId: string }
  | { type: "dispose"; runId: string };

/** Thrown when a message does not match the protocol: a bug on one side, never guest-controlled. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export type Check = (value: unknown) => boolean;

export const isString: Check = (value) => typeof value === "string";
export const isNumber: Check = (value) => typeof value === "number" && Number.isFinite(value);
export const isBoolean: Check = (value) => typeof value === "boolean";
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
export const isArrayOf =
  (item: Check): Check =>
  (value) =>
    Array.isArray(value) && value.every(item);
export const isJson: Check = (value) => value !== undefined && typeof value !== "function";

/**
 * The first field `value` lacks or holds malformed, or null when every check passes. The caller words
 * the error: building its label for every message would cost a string per nested call.
 */
function refusedField(value: Record<string, unknown>, fields: Record<string, Check>): string | null {
  // for-in over the fixed check tables (V8 caches their keys): no entries array per message.
  for (const key in fields) {
    if (!(fields[key] as Check)(value[key])) return key;
  }
  return null;
}

const isLimits: Check = (value) =>
  isRecord(value) &&
  ["memoryLimitBytes", "maxOutputBytes", "maxPendingToolCalls", "maxSnapshotBytes"].every(
    (key) => isNumber(value[key]) && (value[key] as number) > 0,
  ) &&
  (value.maxQueuedToolCalls === undefined ||
    (isNumber(value.maxQueuedToolCalls) && (value.maxQueuedToolCalls as number) >= 0));

export const isOutput: Check = (value) =>
  isRecord(value) &&
  ((value.type === "text" &&
    isString(value.text) &&
    (value.level === undefined || (CONSOLE_LEVELS as readonly unknown[]).includes(value.level))) ||
    (value.type === "json" && "value" in value) ||
    (value.type === "image" &&
      (IMAGE_MIME_TYPES as readonly unknown[]).includes(value.mimeType) &&
      isString(value.data)));

const requestBodyChecks: Record<HostRequestKind, Record<string, Check>> = {
  search: {
    query: isString,
    options: (value) =>
      value === undefined || (isRecord(value) && (value.limit === undefined || isNumber(value.limit))),
    scope: (value) => value === undefined || value === "mcp",
  },
  describe: { target: isString },
  call: { target: isString, input: isJson },
  mcp: {
    server: isString,
    op: (value) => (MCP_OPERATIONS as readonly unknown[]).includes(value),
    toolId: (value) => value === undefined || isString(value),
    args: isArrayOf(isJson),
  },
  namespace: { namespaceId: isString, path: isString, args: isArrayOf(isJson) },
  api: { path: isString },
  yield: { reason: (value) => value === undefined || isString(value) },
  store: {
    op: (value) => (STORE_OPERATIONS as readonly unknown[]).includes(value),
    key: (value) => value === undefined || isString(value),
    value: (value) => value === undefined || isJson(value),
  },
};

/** Validate a request body the guest produced (kind plus fields), without the id. */
export function parseHostRequestBody(value: unknown): HostRequestBody {
  if (!isRecord(value) || typeof value.kind !== "string" || !(value.kind in requestBodyChecks)) {
    throw new ProtocolError("host request: unknown kind");
  }
  const refused = refusedField(value, requestBodyChecks[value.kind as HostRequestKind]);
  if (refused !== null) {
    throw new ProtocolError(`host request "${value.kind}": field "${refused}" is missing or malformed`);
  }
  return value as HostRequestBody;
}

export function isHostRequest(value: unknown): value is HostRequest {
  if (!isRecord(value) || !isString(value.requestId)) return false;
  try {
    parseHostRequestBody(value);
    return true;
  } catch {
    return false;
  }
}

const isSettleItem = (item: unknown): boolean =>
  isRecord(item) &&
  typeof item.requestId === "string" &&
  typeof item.ok === "boolean" &&
  typeof item.json === "string" &&
  (item.shallow === undefined || typeof item.shallow === "boolean");

const isSignal: Check = (value) => value instanceof Int32Array && value.length >= 1;

const hostMessageChecks: Record<HostToWorkerMessage["type"], Record<string, Check>> = {
  init: {
    module: isWasmModule,
    snapshotSecret: (value) => value === null || isString(value),
    doorbell: (value) => value === undefined || isSignal(value),
    channel: (value) => value === undefined || isSharedChannelBuffer(value),
    prelude: (value) =>
      value === undefined ||
      value === null ||
      (isRecord(value) &&
        isString(value.source) &&
        value.bytecode instanceof Uint8Array &&
        (value.image === undefined || value.image instanceof Uint8Array)),
    entropy: (value) => value === undefined || value instanceof Uint8Array,
  },
  start: {
    runId: isString,
    code: isString,
    language: isString,
    surface: isString,
    limits: isLimits,
    deadlineAt: isNumber,
    timeoutMs: (value) => value === undefined || (isNumber(value) && (value as number) > 0),
    signal: isSignal,
  },
  restore: {
    runId: isString,
    snapshot: (value) => value instanceof Uint8Array,
    limits: isLimits,
    deadlineAt: isNumber,
    signal: isSignal,
  },
  settle: {
    runId: isString,
    deadlineAt: isNumber,
    items: isArrayOf(isSettleItem),
  },
  suspend: { runId: isString },
  dispose: { runId: isString },
};

export function parseMessage<T>(
  value: unknown,
  checks: Record<string, Record<string, Check>>,
  side: string,
): T {
  if (!isRecord(value) || typeof value.type !== "string" || !Object.hasOwn(checks, value.type)) {
    throw new ProtocolError(
      `${side} message: unknown type ${JSON.stringify(isRecord(value) ? value.type : value)}`,
    );
  }
  const refused = refusedField(value, checks[value.type] as Record<string, Check>);
  if (refused !== null) {
    throw new ProtocolError(`${side} message "${value.type}": field "${refused}" is missing or malformed`);
  }
  return value as T;
}

/**
 * A well-formed settle (the message of every nested call), checked field by field: the same checks as
 * the table's, without walking it. Anything else, a malformed settle included, takes the table, which
 * says what is wrong.
 */
function isWellFormedSettle(value: unknown): boolean {
  if (
    !isRecord(value) ||
    value.type !== "settle" ||
    typeof value.runId !== "string" ||
    !isNumber(value.deadlineAt)
  ) {
    return false;
  }
  const items = value.items;
  if (!Array.isArray(items)) return false;
  for (let index = 0; index < items.length; index++) if (!isSettleItem(items[index])) return false;
  return true;
}

/** Validate what the worker received from the host. */
export function parseHostToWorkerMessage(value: unknown): HostToWorkerMessage {
  if (isWellFormedSettle(value)) return value as HostToWorkerMessage;
  return parseMessage<HostToWorkerMessage>(value, hostMessageChecks, "host-to-worker");
}
