import type { CodeModeOutput, JsonValue } from "@codecell/contract";
import {
  type CodeModeErrorCode,
  type CodeModeErrorData,
  isCodeModeErrorCode,
} from "@codecell/contract/errors";
import { isErrorData } from "./error-data.js";
import {
  type Check,
  type HostRequest,
  isArrayOf,
  isHostRequest,
  isJson,
  isNumber,
  isOutput,
  isRecord,
  isString,
  parseMessage,
} from "./worker-protocol.js";

/** Worker to host. Every start, restore and settle is answered by exactly one idle, completed or failed. */
export type WorkerToHostMessage =
  | { type: "ready" }
  | { type: "init-failed"; message: string }
  /** The VM is ready and the cell's own clock starts now (runs started with `timeoutMs`). */
  | { type: "started"; runId: string; deadlineAt: number }
  | { type: "request"; runId: string; request: HostRequest }
  /**
   * The job queue is empty with host calls pending. `pending` lists only requests the host has had no
   * request message of (a restored run's pending calls, in its first idle); otherwise it is empty.
   * `requests`, when present, are the requests the drain issued, in order, exactly as if each had come
   * in its own request message just before this idle (one flat message per round trip, because a nested
   * batch of a request and an idle is dearer to clone).
   */
  | {
      type: "idle";
      runId: string;
      requests?: HostRequest[];
      pending: HostRequest[];
      output: CodeModeOutput[];
    }
  | { type: "completed"; runId: string; value: JsonValue; output: CodeModeOutput[] }
  | {
      type: "failed";
      runId: string;
      code: CodeModeErrorCode | null;
      message: string;
      error: CodeModeErrorData | null;
      output: CodeModeOutput[];
    }
  | { type: "suspended"; runId: string; snapshot: Uint8Array; pending: HostRequest[] }
  | { type: "suspend-failed"; runId: string; code: CodeModeErrorCode; message: string }
  /** Several of the above in order: the requests of a short drain travel with the state that ends it. */
  | { type: "batch"; messages: WorkerToHostMessage[] };

// Made once: a check table entry that built its checker per message would cost a closure per call.
const isHostRequestArray = isArrayOf(isHostRequest);

const workerMessageChecks: Record<WorkerToHostMessage["type"], Record<string, Check>> = {
  ready: {},
  "init-failed": { message: isString },
  started: { runId: isString, deadlineAt: isNumber },
  request: { runId: isString, request: isHostRequest },
  idle: {
    runId: isString,
    requests: (value) => value === undefined || isHostRequestArray(value),
    pending: isHostRequestArray,
    output: isArrayOf(isOutput),
  },
  completed: { runId: isString, value: isJson, output: isArrayOf(isOutput) },
  failed: {
    runId: isString,
    code: (value) => value === null || isCodeModeErrorCode(value),
    message: isString,
    error: (value) => value === null || isErrorData(value),
    output: isArrayOf(isOutput),
  },
  suspended: {
    runId: isString,
    snapshot: (value) => value instanceof Uint8Array,
    pending: isHostRequestArray,
  },
  "suspend-failed": { runId: isString, code: isCodeModeErrorCode, message: isString },
  batch: {
    messages: isArrayOf(
      (item) => typeof item === "object" && item !== null && (item as { type?: unknown }).type !== "batch",
    ),
  },
};

/**
 * A well-formed idle whose drain issued tool calls and nothing else (the message of every quick
 * nested call), checked field by field with the table's checks: the table's walk reads each field
 * through a computed key, which V8 serves on its slowest (megamorphic) path, several times a call.
 * Anything else, a malformed such idle included, takes the table, which says what is wrong.
 */
function isWellFormedCallIdle(value: unknown): boolean {
  if (!isRecord(value) || value.type !== "idle" || typeof value.runId !== "string") return false;
  const { requests, pending, output } = value;
  if (
    !Array.isArray(requests) ||
    !Array.isArray(pending) ||
    pending.length !== 0 ||
    !Array.isArray(output) ||
    output.length !== 0
  ) {
    return false;
  }
  for (let index = 0; index < requests.length; index++) {
    const request: unknown = requests[index];
    if (
      !isRecord(request) ||
      typeof request.requestId !== "string" ||
      request.kind !== "call" ||
      typeof request.target !== "string" ||
      !isJson(request.input)
    ) {
      return false;
    }
  }
  return true;
}

/** Validate what the host received from a worker. */
export function parseWorkerToHostMessage(value: unknown): WorkerToHostMessage {
  if (isWellFormedCallIdle(value)) return value as WorkerToHostMessage;
  const message = parseMessage<WorkerToHostMessage>(value, workerMessageChecks, "worker-to-host");
  if (message.type === "batch") {
    for (const inner of message.messages)
      parseMessage<WorkerToHostMessage>(inner, workerMessageChecks, "worker-to-host");
  }
  return message;
}
