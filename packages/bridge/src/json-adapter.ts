import { CodeModeError, type CodeModeErrorCode, type JsonValue } from "@codecell/contract/errors";
import { MAX_BRIDGE_DEPTH } from "./json-depth.js";

/**
 * The one way a value crosses between host and guest: as a single JSON text with an explicit byte cap.
 *
 * Fallbacks (the guest prelude applies the same table to values leaving the guest):
 * - `undefined`, functions and symbols as object members are dropped; in arrays they become `null`
 *   (plain JSON); a top-level `undefined` becomes `null`.
 * - BigInt becomes its decimal string; Date its ISO string (an invalid Date becomes `null`).
 * - Map becomes an array of `[key, value]` pairs; Set an array of its values.
 * - Error becomes `{ name, message }` plus `code` when it has a string `code`.
 * - NaN and the infinities become `null` (plain JSON).
 * - Binary values (ArrayBuffer, SharedArrayBuffer, typed arrays, DataView) and cycles are refused, and
 *   so is nesting deeper than MAX_BRIDGE_DEPTH objects and arrays.
 *   Shared references that are not cycles are written out once per place they appear.
 */
export type JsonTextOptions = {
  /** Largest UTF-8 size of the JSON text. */
  maxBytes: number;
  /** What the value is, for error messages: "tool result", "surface", "output". */
  label?: string;
  /** Code of the CodeModeError thrown when the value cannot cross. Default `invalid_input`. */
  errorCode?: CodeModeErrorCode;
};

/**
 * A value as the bridge carries it. `shallow`: the text is known to nest objects and arrays at most
 * `PLAIN_DATA_DEPTH + 1` levels (a primitive, or plain data the fast path checked), far below
 * MAX_BRIDGE_DEPTH, so whoever reads it need not scan it for depth (see exceedsJsonDepth).
 */
export type JsonText = { text: string; bytes: number; shallow: boolean };

function describePath(path: readonly (string | number)[]): string {
  let out = "$";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : `.${part}`;
  return out;
}

function isBinary(value: object): boolean {
  return (
    ArrayBuffer.isView(value) ||
    value instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer)
  );
}

/** Convert a host value to the JSON-safe form described above, without serializing it. */
export function toJsonValue(value: unknown, options: Omit<JsonTextOptions, "maxBytes"> = {}): JsonValue {
  const label = options.label ?? "value";
  const code = options.errorCode ?? "invalid_input";
  const ancestors: object[] = [];
  const path: (string | number)[] = [];

  const fail = (what: string, hint: string): never => {
    throw new CodeModeError(
      code,
      `The ${label} cannot cross the sandbox bridge: ${what} at ${describePath(path)}. ${hint}`,
      {
        path: describePath(path),
      },
    );
  };

  // Returns undefined for "drop this member".
  const convert = (input: unknown, inArray: boolean): JsonValue | undefined => {
    switch (typeof input) {
      case "string":
      case "boolean":
        return input;
      case "number":
        return Number.isFinite(input) ? input : null;
      case "bigint":
        return input.toString();
      case "undefined":
      case "function":
      case "symbol":
        return inArray ? null : undefined;
    }
    if (input === null) return null;
    const object = input as object;
    if (isBinary(object)) {
      return fail(
        "a binary value",
        "Binary data is not supported in v1; send base64 text or an array of numbers.",
      );
    }
    if (ancestors.includes(object)) {
      return fail("a cycle", "Remove the back-reference or send an id instead of the object.");
    }
    if (object instanceof Date) {
      return Number.isNaN(object.getTime()) ? null : object.toISOString();
    }
    if (ancestors.length >= MAX_BRIDGE_DEPTH) {
      return fail(
        `nesting deeper than ${MAX_BRIDGE_DEPTH} levels`,
        "Flatten the value (or send the deep part as a string).",
      );
    }
    ancestors.push(object);
    try {
      if (object instanceof Map) {
        const pairs: JsonValue[] = [];
        let index = 0;
        for (const [key, item] of object) {
          path.push(index);
          pairs.push([convert(key, true) ?? null, convert(item, true) ?? null]);
          path.pop();
          index++;
        }
        return pairs;
      }
      if (object instanceof Set || Array.isArray(object)) {
        const items: JsonValue[] = [];
        let index = 0;
        for (const item of object as Iterable<unknown>) {
          path.push(index);
          items.push(convert(item, true) ?? null);
          path.pop();
          index++;
        }
        return items;
      }
      if (object instanceof Error) {
        const data: { [key: string]: JsonValue } = {
          name: String(object.name),
          message: String(object.message),
        };
        const errorCode = (object as { code?: unknown }).code;
        if (typeof errorCode === "string") data.code = errorCode;
        return data;
      }
      const toJSON = (object as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === "function") {
        return convert(toJSON.call(object), inArray);
      }
      // Own enumerable string keys only, written with defineProperty so a "__proto__" key stays data.
      const result: { [key: string]: JsonValue } = {};
      for (const key of Object.keys(object)) {
        path.push(key);
        const item = convert((object as Record<string, unknown>)[key], false);
        path.pop();
        if (item !== undefined) {
          Object.defineProperty(result, key, {
            value: item,
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
      }
      return result;
    } finally {
      ancestors.pop();
    }
  };

  return convert(value, false) ?? null;
}

/** Thrown inside the fast path's replacer: the value needs the full conversion. */
const needsFullConversion = Symbol("needsFullConversion");

// A value the plain-data check turns down (a class instance, a Date, a bigint, deep nesting) goes
// through JSON.stringify with this replacer. Anything the fallbacks treat specially (and cycles, which
// JSON.stringify throws on) takes the full pass, which also names the path of a refused value.
function fastReplacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      if (value instanceof Map || value instanceof Set || value instanceof Error || isBinary(value)) {
        throw needsFullConversion;
      }
    }
  }
  return value;
}

/** How deep isPlainData looks before it leaves a value to the replacer's pass (a cycle stops here too). */
const PLAIN_DATA_DEPTH = 64;

/**
 * Whether an object is plain JSON data all the way down: arrays, and objects whose prototype is
 * `Object.prototype` or null, holding only strings, numbers, booleans, null and undefined. For such a
 * value the replacer changes nothing, and JSON.stringify without one stays on V8's fast path: a tool
 * result of 10,000 small objects is written in about half the time (C4). Anything else (a
 * function, a `toJSON` among them; a bigint; another prototype; deeper nesting, a cycle) answers false
 * and the replacer's pass decides, as before. A getter or proxy trap that throws makes the caller's
 * catch take the full conversion.
 */
function isPlainData(value: object, depth: number): boolean {
  if (depth > PLAIN_DATA_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      if (!isPlainMember(value[index], depth)) return false;
    }
    return true;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  for (const key in value) {
    if (!isPlainMember((value as Record<string, unknown>)[key], depth)) return false;
  }
  return true;
}

/**
 * Whether host code gave every object or array a `toJSON` (on Object.prototype or Array.prototype, where
 * isPlainData's walk would not see a non-enumerable one): JSON.stringify would then write what it
 * returns, not the walked value, so nothing is known to be plain.
 */
function prototypesHaveToJson(): boolean {
  return (
    (Object.prototype as { toJSON?: unknown }).toJSON !== undefined ||
    (Array.prototype as { toJSON?: unknown }).toJSON !== undefined
  );
}

function isPlainMember(member: unknown, depth: number): boolean {
  switch (typeof member) {
    case "string":
    case "number":
    case "boolean":
    case "undefined":
      return true;
    case "object":
      return member === null || isPlainData(member, depth + 1);
    default:
      return false;
  }
}

/**
 * Serialize a host value for the bridge: one JSON text, refused when over `maxBytes`. Nesting is
 * checked where the text is read (the sandbox worker), off the host's thread, unless the fast path
 * already knows it is shallow; a value too deep for `JSON.stringify` itself takes the full pass, which
 * refuses it by depth.
 */
export function toJsonText(value: unknown, options: JsonTextOptions): JsonText {
  let text: string | undefined;
  let shallow = true;
  if (typeof value !== "object" && typeof value !== "bigint") {
    // A primitive (the common tool result) needs no replacer, and JSON.stringify without one stays on
    // V8's fast path; only a bigint needs the replacer's conversion.
    text = JSON.stringify(value) ?? "null";
  } else if (value === null) {
    text = "null";
  } else {
    try {
      shallow = !prototypesHaveToJson() && isPlainData(value as object, 0);
      text = (shallow ? JSON.stringify(value) : JSON.stringify(value, fastReplacer)) ?? "null";
    } catch {
      // The replacer asked for the full conversion, or the value has a cycle: the full pass decides.
      shallow = false;
    }
  }
  text ??= JSON.stringify(toJsonValue(value, options));
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > options.maxBytes) {
    throw new CodeModeError(
      options.errorCode ?? "invalid_input",
      `The ${options.label ?? "value"} is ${bytes} bytes as JSON, over the bridge limit of ${options.maxBytes} bytes. Return less data (filter or page it) before it crosses.`,
      { bytes, maxBytes: options.maxBytes },
    );
  }
  return { text, bytes, shallow };
}

/**
 * Parse JSON text that came from the guest. `JSON.parse` defines every key as an own data property,
 * so a `"__proto__"` key never reaches a prototype; this keeps that guarantee in one place.
 */
export function parseJsonText(text: string, label = "value"): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new CodeModeError(
      "internal_error",
      `The ${label} from the sandbox is not valid JSON: ${(error as Error).message}`,
    );
  }
}
