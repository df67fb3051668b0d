// @ts-check
import {
  exceedsJsonDepth,
  MAX_BRIDGE_DEPTH,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ERROR_NAME_LENGTH,
  parseHostRequestBody,
  takesToolCallSlot,
} from "@codecell/bridge";
import { CONSOLE_LEVELS, IMAGE_MIME_TYPES, isCodeModeErrorCode } from "@codecell/contract/errors";
import { describeGuestError } from "./cell-text.js";
import { holdRequest } from "./outbox.js";

/**
 * The host function: what a run's guest calls through the prelude (a request for the host, output, its
 * returned value or its failure), checked against the run's limits before anything crosses to the host.
 * @typedef {import("./guest-run.js").GuestRun} GuestRun
 * @typedef {import("quickjs-wasi").QuickJS} QuickJS
 */

/** The one host function; its name is baked into snapshots, so it must never change. */
export const HOST_FUNCTION_NAME = "codecellHost";
/** Largest JSON body of one host request (tool input). */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/**
 * Messages QuickJS gives the RangeError it throws when a string or array would pass the engine's size
 * limits; the guest-visible sign that a cell built a value too large, like running out of memory.
 */
const ENGINE_SIZE_LIMIT_MESSAGES = new Set(["string too long", "invalid string length", "out of memory"]);

/** @param {string} level @returns {level is import("@codecell/contract").ConsoleLevel} */
function isConsoleLevel(level) {
  return /** @type {readonly string[]} */ (CONSOLE_LEVELS).includes(level);
}

/** @param {string} text */
function byteLength(text) {
  return Buffer.byteLength(text, "utf8");
}

/** @param {string} text @param {number} max */
function clip(text, max) {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** @param {import("quickjs-wasi").JSValueHandle[]} args @param {GuestRun} run */
function hostCall(run, args) {
  // The previous reply has been handed to the guest (the library holds its own reference).
  run.lastReply?.dispose();
  run.lastReply = null;
  // A request is the one call with a single argument (see the prelude's host protocol): reading the
  // op string out of the VM would cost more than the rest of the call's bookkeeping here.
  if (args.length === 1) {
    const body = /** @type {import("quickjs-wasi").JSValueHandle} */ (args[0]);
    return requestReply(run, onRequest(run, run.vmStrings().read(body)));
  }
  // Read in place (VmStrings), not through the library's toString, which allocates and frees a length
  // word in the VM and decodes a copy: a cell's `done`, and every console line, come this way.
  const strings = run.vmStrings();
  /** @param {number} index */
  const text = (index) => {
    const handle = args[index];
    return handle === undefined ? undefined : strings.read(handle);
  };
  const op = text(0);
  let reply = "";
  if (op === "output") reply = onOutput(run, text(1) ?? "", text(2) ?? "", text(3));
  else if (op === "done") onDone(run, text(1) ?? "null");
  else if (op === "fail") onFail(run, text(1) ?? "{}");
  if (reply === "") return run.heldStrings().empty;
  run.lastReply = strings.newString(reply);
  return run.lastReply;
}

/**
 * The guest's answer to a request: its number (a number costs one call into the VM to make, a string
 * several), kept until the result is delivered, which passes the same value back; or the refusal.
 * @param {{ requestId: string, number: number } | string} outcome
 * @param {GuestRun} run
 */
function requestReply(run, outcome) {
  if (typeof outcome === "string") {
    run.lastReply = run.vmStrings().newString(outcome);
    return run.lastReply;
  }
  const id = newRequestId(run, outcome.requestId);
  run.requestIdHandles.set(outcome.requestId, id);
  return id;
}

/**
 * The guest's value for a request id: its number (request "r7" is 7), which costs one call into the VM
 * to make where a string costs several. @param {GuestRun} run @param {string} requestId
 */
export function newRequestId(run, requestId) {
  return /** @type {QuickJS} */ (run.vm).newNumber(Number(requestId.slice(1)));
}

/** @param {string} name @param {string} message @param {import("@codecell/contract").CodeModeErrorCode} code @param {GuestRun} run */
function refusal(run, name, message, code) {
  run.issuedCodes.add(code);
  return JSON.stringify({ error: { name, message, code } });
}

/**
 * A value leaving the guest as JSON text crosses to the host as a structured clone, whose reader
 * fails (unattributably) on deep nesting: refuse it here, in the worker, with a clear message.
 * @param {string} text @param {string} what
 */
export function tooDeep(text, what) {
  if (!exceedsJsonDepth(text, MAX_BRIDGE_DEPTH)) return null;
  return `${what} nests objects and arrays more than ${MAX_BRIDGE_DEPTH} levels deep, the sandbox bridge limit; flatten it (or send it as a string) before it crosses.`;
}

/**
 * @param {string} bodyText
 * @returns {{ requestId: string, number: number } | string} the new request, or a refusal (JSON)
 * @param {GuestRun} run
 */
function onRequest(run, bodyText) {
  if (run.forced !== null) return refusal(run, "CodeModeError", run.forced.message, run.forced.code);
  // UTF-8 takes at most 3 bytes per UTF-16 unit: a short body needs no count.
  const bytes = bodyText.length * 3 <= MAX_REQUEST_BYTES ? 0 : byteLength(bodyText);
  if (bytes > MAX_REQUEST_BYTES) {
    return refusal(
      run,
      "CodeModeError",
      `The tool input is ${bytes} bytes of JSON, over the ${MAX_REQUEST_BYTES} byte bridge limit; send less data per call.`,
      "invalid_input",
    );
  }
  const deep = tooDeep(bodyText, "The tool input");
  if (deep !== null) return refusal(run, "CodeModeError", deep, "invalid_input");
  let body;
  try {
    body = parseHostRequestBody(JSON.parse(bodyText));
  } catch (error) {
    return refusal(
      run,
      "TypeError",
      `Invalid host call: ${/** @type {Error} */ (error).message}`,
      "invalid_input",
    );
  }
  const toolCall = takesToolCallSlot(body);
  if (toolCall) {
    const tooMany = tooManyToolCalls(run);
    if (tooMany !== null) return tooMany;
  }
  run.nextRequestNumber += 1;
  const number = run.nextRequestNumber;
  const requestId = `r${number}`;
  // The body is a fresh object of JSON.parse's: it becomes the request itself (no copy).
  const request = /** @type {import("@codecell/bridge").HostRequest} */ (body);
  request.requestId = requestId;
  run.pending.set(requestId, request);
  if (toolCall) run.pendingToolCalls += 1;
  holdRequest(run, request, bodyText.length);
  return { requestId, number };
}

/**
 * The host runs maxPendingToolCalls tool calls at once and queues up to maxQueuedToolCalls more in
 * order; only a call past both is refused. Searches, describes and yields are not counted.
 * @returns {string | null} a refusal for the guest to throw, or null
 * @param {GuestRun} run
 */
function tooManyToolCalls(run) {
  const running = run.limits.maxPendingToolCalls;
  const queued = run.limits.maxQueuedToolCalls ?? 0;
  if (run.pendingToolCalls < running + queued) return null;
  const message =
    queued === 0
      ? `Too many tool calls in flight: ${run.pendingToolCalls} are pending and maxPendingToolCalls is ${running} (with maxQueuedToolCalls 0, none may wait for a slot). Await some calls before starting more.`
      : `Too many tool calls waiting: ${running} run at once (maxPendingToolCalls) and ${queued} more are queued, the most maxQueuedToolCalls allows. Await some calls before starting more, or work in batches.`;
  return refusal(run, "CodeModeError", message, "too_many_pending_tool_calls");
}

/** @param {string} requestId @returns {boolean} whether it was pending @param {GuestRun} run */
export function forgetPending(run, requestId) {
  const request = run.pending.get(requestId);
  if (request === undefined) return false;
  run.pending.delete(requestId);
  if (takesToolCallSlot(request)) run.pendingToolCalls -= 1;
  return true;
}

/** @param {number} bytes @param {string} what @param {GuestRun} run */
function chargeOutput(run, bytes, what) {
  if (run.outputBytes + bytes > run.limits.maxOutputBytes) {
    run.force(
      "output_limit_exceeded",
      `Output limit exceeded: ${what} would bring the run to ${run.outputBytes + bytes} bytes, over maxOutputBytes ${run.limits.maxOutputBytes}. Return less (summarize, filter or page).`,
    );
    return false;
  }
  run.outputBytes += bytes;
  run.unreportedChars += bytes;
  return true;
}

/**
 * @param {string} kind @param {string} text @param {string} [level] console level, for console.*
 * @returns {string} "" or a refusal for the guest to throw
 * @param {GuestRun} run
 */
function onOutput(run, kind, text, level) {
  // Work the cell left running after it returned may still add output until it settles.
  if (run.forced !== null || (run.outcome !== null && run.outcome.type !== "completed")) return "";
  if (kind === "image") return onImages(run, text);
  if (kind !== "text") {
    const deep = tooDeep(text, "The json() value");
    if (deep !== null) return refusal(run, "CodeModeError", deep, "invalid_input");
  }
  const consoleLevel = level !== undefined && isConsoleLevel(level) ? level : null;
  const what = consoleLevel ? `console.${consoleLevel}()` : kind === "text" ? "text()" : "json()";
  if (!chargeOutput(run, byteLength(text), what)) return "";
  if (kind !== "text") run.output.push({ type: "json", value: JSON.parse(text) });
  else run.output.push(consoleLevel ? { type: "text", text, level: consoleLevel } : { type: "text", text });
  return "";
}

const DATA_URL = /^data:([^;,]+);base64,([A-Za-z0-9+/]*={0,2})$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * `image(source)`: the prelude sends the images it found in the source ({dataUrl} or {mimeType, data}),
 * and each becomes an image output item once its type, encoding and size pass.
 * @param {GuestRun} run @param {string} text
 * @returns {string} "" or a refusal for the guest to throw
 */
function onImages(run, text) {
  const images = run.limits.images;
  if (images === undefined) {
    return refusal(
      run,
      "CodeModeError",
      "image() is off in this gateway: images cannot leave a cell unless the operator sets tools.codeMode.images: true. Describe the image in text instead.",
      "invalid_input",
    );
  }
  /** @type {Array<{ dataUrl?: unknown, mimeType?: unknown, data?: unknown }>} */
  const sources = JSON.parse(text);
  /** @type {import("@codecell/contract").CodeModeOutput[]} */
  const items = [];
  for (const source of sources) {
    let mimeType = source.mimeType;
    let data = source.data;
    if (typeof source.dataUrl === "string") {
      const match = DATA_URL.exec(source.dataUrl);
      if (match === null) {
        return refusal(
          run,
          "CodeModeError",
          'image(source): a string source must be a base64 data URL such as "data:image/png;base64,iVBORw0KGgo..."',
          "invalid_input",
        );
      }
      mimeType = match[1];
      data = match[2];
    }
    if (
      typeof mimeType !== "string" ||
      !(/** @type {readonly string[]} */ (IMAGE_MIME_TYPES).includes(mimeType))
    ) {
      return refusal(
        run,
        "CodeModeError",
        `image(source): the type ${JSON.stringify(mimeType)} is not one a cell may show; the allowed types are ${IMAGE_MIME_TYPES.join(", ")}.`,
        "invalid_input",
      );
    }
    if (typeof data !== "string" || data.length === 0 || data.length % 4 !== 0 || !BASE64.test(data)) {
      return refusal(
        run,
        "CodeModeError",
        "image(source): the image data must be non-empty base64 text.",
        "invalid_input",
      );
    }
    if (data.length > images.maxBytes) {
      return refusal(
        run,
        "CodeModeError",
        `image(source): the image is ${data.length} bytes of base64, over the cap of ${images.maxBytes} per image (tools.codeMode.maxImageBytes). Show a smaller image (a clip or a lower resolution).`,
        "output_limit_exceeded",
      );
    }
    items.push({
      type: "image",
      mimeType: /** @type {import("@codecell/contract").ImageMimeType} */ (mimeType),
      data,
    });
  }
  for (const item of items) {
    if (!chargeOutput(run, /** @type {{ data: string }} */ (item).data.length, "image()")) return "";
    run.output.push(item);
  }
  return "";
}

/** @param {string} text @param {GuestRun} run */
function onDone(run, text) {
  if (run.forced !== null || run.outcome !== null) return;
  const deep = tooDeep(text, "The returned value");
  if (deep !== null) {
    run.outcome = {
      type: "failed",
      code: "invalid_input",
      message: deep,
      error: { name: "CodeModeError", message: deep, code: "invalid_input" },
    };
    return;
  }
  if (!chargeOutput(run, byteLength(text), "the returned value")) return;
  run.outcome = { type: "completed", value: JSON.parse(text) };
}

/** @param {string} text @param {GuestRun} run */
function onFail(run, text) {
  if (run.forced !== null || run.outcome !== null) return;
  const data = JSON.parse(text);
  // A guest can throw a message of many megabytes; only a bounded description crosses to the host.
  data.name = clip(String(data.name), MAX_ERROR_NAME_LENGTH);
  data.message = clip(String(data.message), MAX_ERROR_MESSAGE_LENGTH);
  data.stack = clip(String(data.stack ?? ""), MAX_ERROR_MESSAGE_LENGTH);
  if (
    (data.name === "RangeError" || data.name === "InternalError") &&
    ENGINE_SIZE_LIMIT_MESSAGES.has(data.message)
  ) {
    // The engine refused to build a string or array that large: a memory limit the model must
    // know about, not a bug in its code. (A guest that throws this exact error itself gains
    // nothing: it could reach the limit for real just as fast.)
    const message = `The cell built a value larger than the engine allows (${data.name}: ${data.message}). Work on less data at once (page, filter or summarize).`;
    run.outcome = {
      type: "failed",
      code: "memory_limit_exceeded",
      message: `${describeGuestError(data)}: ${message}`,
      error: { name: data.name, message: data.message, code: "memory_limit_exceeded" },
    };
    return;
  }
  const code = isCodeModeErrorCode(data.code) && run.issuedCodes.has(data.code) ? data.code : null;
  /** @type {{ name: string, message: string, code?: string }} */
  const error = { name: String(data.name), message: String(data.message) };
  if (code !== null) error.code = code;
  run.outcome = { type: "failed", code, message: describeGuestError(data), error };
}

/** @param {GuestRun} run */
export function hostCallback(run) {
  return (/** @type {import("quickjs-wasi").JSValueHandle[]} */ ...args) => hostCall(run, args);
}
