import { INTERNAL_NAME_PREFIX } from "./scope-format.js";

// The guest's own globals and the standard built-ins a namespace must not shadow.
const GUEST_GLOBALS = ["ALL_TOOLS", "tools", "MCP", "API", "namespaces", "text", "json", "yield_control"];
const STANDARD_GLOBALS = (
  "globalThis Object Function Array Number Boolean String Symbol BigInt Date Promise RegExp Error " +
  "AggregateError EvalError RangeError ReferenceError SyntaxError TypeError URIError JSON Math Reflect Proxy " +
  "Map Set WeakMap WeakSet WeakRef FinalizationRegistry ArrayBuffer SharedArrayBuffer DataView Atomics " +
  "Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array Uint32Array Float32Array " +
  "Float64Array BigInt64Array BigUint64Array Iterator parseInt parseFloat isNaN isFinite decodeURI " +
  "decodeURIComponent encodeURI encodeURIComponent escape unescape eval console Intl WebAssembly"
).split(" ");
const RESERVED_WORDS = (
  "await break case catch class const continue debugger default delete do else enum export extends false " +
  "finally for function if implements import in instanceof interface let new null package private " +
  "protected public return static super switch this throw true try typeof var void while with yield " +
  "arguments undefined NaN Infinity async of"
).split(" ");

const taken: ReadonlySet<string> = new Set([...GUEST_GLOBALS, ...STANDARD_GLOBALS, ...RESERVED_WORDS]);

/** Why `name` cannot be a namespace global, or undefined when it can. */
export function globalNameProblem(name: unknown): string | undefined {
  if (typeof name !== "string" || !/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name)) {
    return "is not a JavaScript identifier (letters, digits, _ and $, not starting with a digit)";
  }
  if (name.startsWith(INTERNAL_NAME_PREFIX)) return `uses the internal prefix "${INTERNAL_NAME_PREFIX}"`;
  if (GUEST_GLOBALS.includes(name)) return "is a built-in code-mode global";
  if (taken.has(name)) return "is a reserved word or standard JavaScript global";
  return undefined;
}
