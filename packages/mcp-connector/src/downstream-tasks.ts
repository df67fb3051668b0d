import type { JSONRPCMessage, Transport } from "@modelcontextprotocol/client";

/** The extension a 2026-07-28 server answers a `tools/call` with a task handle under. */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** Poll no faster than this, whatever the server suggests, and no slower than the upper bound. */
const MIN_POLL_MS = 10;
const MAX_POLL_MS = 5_000;
/** Without a `ttlMs` from the server, a task that never settles stops being polled after this long. */
const DEFAULT_TASK_LIFETIME_MS = 24 * 60 * 60 * 1000;
const POLL_ID_PREFIX = "codecell-task-poll-";

type JsonObject = Record<string, unknown>;

type PendingCall = { meta: JsonObject | undefined };

/** The transport, and how a call says it was given up (aborted or timed out) so its task is cancelled. */
export type TaskTransport = {
  transport: Transport;
  /**
   * Ties the `tools/call` whose `arguments` is this very object to `ended`: when `ended` aborts while
   * the call's task is still running, the task is cancelled with `tasks/cancel`.
   */
  endWith(args: object, ended: AbortSignal): void;
};

type ActiveTask = {
  taskId: string;
  callId: string | number;
  meta: JsonObject | undefined;
  stopped: boolean;
  timer: NodeJS.Timeout | undefined;
};

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function pollInterval(value: unknown): number {
  const ms = typeof value === "number" && Number.isFinite(value) ? value : 1_000;
  return Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, ms));
}

/**
 * SDK 2.4.0 has no code for the tasks extension, so its client rejects a `resultType: "task"` answer.
 * This wraps the client's transport: a `tools/call` answered with a task handle is held back, the task
 * is polled with `tasks/get` (at the server's `pollIntervalMs`, within its `ttlMs`) and the call is
 * answered with the task's final result or error, so the client, and the cell above it, see one slow
 * call. When the caller gives up on the call (the run was aborted, or the call timed out; see
 * `endWith`), the task is cancelled with `tasks/cancel`. Over HTTP the SDK's
 * transport sets the `Mcp-Name` header of these requests from their `taskId`.
 */
export function withDownstreamTasks(transport: Transport): TaskTransport {
  // SDK v2 ends an aborted request on its own side without telling the server (over HTTP it has
  // already had its answer, the task handle), so the call's end is learnt from the caller.
  const endings = new WeakMap<object, AbortSignal>();
  const calls = new Map<string | number, PendingCall>();
  const tasks = new Map<string | number, ActiveTask>();
  const polls = new Map<string, (message: JsonObject) => void>();
  let pollCount = 0;
  let deliver: ((message: JSONRPCMessage, extra?: unknown) => void) | undefined;

  const stopAll = () => {
    for (const task of tasks.values()) {
      task.stopped = true;
      clearTimeout(task.timer);
    }
    tasks.clear();
    polls.clear();
    calls.clear();
  };

  /** Sends one of our own requests and resolves with its answer (a result or an error object). */
  const ask = (method: string, task: ActiveTask): Promise<JsonObject> => {
    const id = `${POLL_ID_PREFIX}${++pollCount}`;
    return new Promise<JsonObject>((resolve, reject) => {
      polls.set(id, resolve);
      const params: JsonObject = { taskId: task.taskId, ...(task.meta ? { _meta: task.meta } : {}) };
      transport.send({ jsonrpc: "2.0", id, method, params } as JSONRPCMessage).catch((error: unknown) => {
        polls.delete(id);
        reject(error);
      });
    });
  };

  const answer = (task: ActiveTask, body: { result: JsonObject } | { error: JsonObject }) => {
    tasks.delete(task.callId);
    if (task.stopped) return;
    task.stopped = true;
    deliver?.({ jsonrpc: "2.0", id: task.callId, ...body } as JSONRPCMessage);
  };

  const fail = (task: ActiveTask, message: string, code = -32603) =>
    answer(task, { error: { code, message } });

  const follow = (task: ActiveTask, handle: JsonObject) => {
    const expiresAt =
      Date.now() + (typeof handle.ttlMs === "number" ? handle.ttlMs : DEFAULT_TASK_LIFETIME_MS);
    const schedule = (delay: number) => {
      if (task.stopped) return;
      task.timer = setTimeout(() => void poll(), delay);
    };
    const poll = async () => {
      if (task.stopped) return;
      if (Date.now() > expiresAt) {
        fail(task, `task ${task.taskId} did not finish within its ttlMs (${String(handle.ttlMs)} ms)`);
        return;
      }
      let reply: JsonObject;
      try {
        reply = await ask("tasks/get", task);
      } catch (error) {
        fail(task, `tasks/get for task ${task.taskId} failed: ${(error as Error).message}`);
        return;
      }
      if (task.stopped) return;
      if (isObject(reply.error)) {
        fail(task, `tasks/get for task ${task.taskId} failed: ${String(reply.error.message)}`);
        return;
      }
      const state = isObject(reply.result) ? reply.result : {};
      switch (state.status) {
        case "completed": {
          const result = isObject(state.result) ? state.result : { content: [] };
          answer(task, { result: { ...result, resultType: "complete" } });
          return;
        }
        case "failed": {
          const error = isObject(state.error) ? state.error : {};
          fail(
            task,
            `task ${task.taskId} failed: ${String(error.message ?? state.statusMessage ?? "no reason given")}`,
            typeof error.code === "number" ? error.code : -32603,
          );
          return;
        }
        case "cancelled":
          fail(task, `task ${task.taskId} was cancelled by the server`);
          return;
        case "input_required":
          fail(
            task,
            `task ${task.taskId} asks for input, which codecell does not answer for downstream tasks yet`,
          );
          void ask("tasks/cancel", task).catch(() => undefined);
          return;
        default:
          schedule(pollInterval(state.pollIntervalMs ?? handle.pollIntervalMs));
      }
    };
    schedule(pollInterval(handle.pollIntervalMs));
  };

  const onIncoming = (message: JSONRPCMessage, extra?: unknown) => {
    const received = message as JsonObject;
    const id = received.id as string | number | undefined;
    if (typeof id === "string" && polls.has(id) && !("method" in received)) {
      const resolve = polls.get(id)!;
      polls.delete(id);
      resolve(received);
      return;
    }
    if (id !== undefined && !("method" in received) && calls.has(id)) {
      const call = calls.get(id)!;
      calls.delete(id);
      const result = received.result;
      if (isObject(result) && result.resultType === "task" && typeof result.taskId === "string") {
        const task: ActiveTask = {
          taskId: result.taskId,
          callId: id,
          meta: call.meta,
          stopped: false,
          timer: undefined,
        };
        tasks.set(id, task);
        follow(task, result);
        return;
      }
    }
    deliver?.(message, extra);
  };

  /** The caller no longer waits for this call: its task, if one runs, is cancelled. */
  const giveUp = (callId: string | number): boolean => {
    calls.delete(callId);
    const task = tasks.get(callId);
    if (!task) return false;
    tasks.delete(callId);
    task.stopped = true;
    clearTimeout(task.timer);
    void ask("tasks/cancel", task).catch(() => undefined);
    return true;
  };

  const send: Transport["send"] = async (message, options) => {
    const outgoing = message as JsonObject;
    if (outgoing.method === "tools/call" && outgoing.id !== undefined) {
      const params = isObject(outgoing.params) ? outgoing.params : {};
      // The poll requests carry the call's own `_meta` envelope (protocol version, capabilities).
      const callId = outgoing.id as string | number;
      calls.set(callId, { meta: isObject(params._meta) ? params._meta : undefined });
      const ended = isObject(params.arguments) ? endings.get(params.arguments) : undefined;
      ended?.addEventListener("abort", () => giveUp(callId), { once: true });
    }
    if (outgoing.method === "notifications/cancelled" && isObject(outgoing.params)) {
      if (giveUp(outgoing.params.requestId as string | number)) return;
    }
    return transport.send(message, options);
  };

  // Closing the transport fires its onclose, whose handler may close it again (re-entering here):
  // once is enough.
  let closed = false;
  const close = async () => {
    stopAll();
    if (closed) return;
    closed = true;
    await transport.close();
  };

  const wrapped = new Proxy(transport, {
    get(target, property, receiver) {
      if (property === "send") return send;
      if (property === "onmessage") return deliver;
      if (property === "close") return close;
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
    set(target, property, value) {
      if (property === "onmessage") {
        deliver = value;
        target.onmessage = value === undefined ? undefined : (onIncoming as Transport["onmessage"]);
        return true;
      }
      if (property === "onclose") {
        target.onclose =
          value === undefined
            ? undefined
            : () => {
                stopAll();
                value();
              };
        return true;
      }
      return Reflect.set(target, property, value);
    },
  });
  return {
    transport: wrapped,
    endWith(args, ended) {
      endings.set(args, ended);
    },
  };
}
