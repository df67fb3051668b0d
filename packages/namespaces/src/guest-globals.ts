import { GUEST_GLOBAL_NAMES, INTERNAL_NAME_PREFIX, JAVASCRIPT_RESERVED_WORDS } from "@codecell/contract";

// The standard built-ins a namespace must not shadow (the guest's own globals come from the contract).
const GUEST_GLOBALS: readonly string[] = GUEST_GLOBAL_NAMES;
const STANDARD_GLOBALS = (
  "globalThis Object Function Array Number Boolean String Symbol BigInt Date Promise RegExp Error " +
  "AggregateError EvalError RangeError ReferenceError SyntaxError TypeError URIError JSON Math Reflect Proxy " +
  "Map Set WeakMap WeakSet WeakRef FinalizationRegistry ArrayBuffer SharedArrayBuffer DataView Atomics " +
  "Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array Uint32Array Float32Array " +
  "Float64Array BigInt64Array BigUint64Array Iterator parseInt parseFloat isNaN isFinite decodeURI " +
  "decodeURIComponent encodeURI encodeURIComponent escape unescape eval console Intl WebAssembly"
).split(" ");
const taken: ReadonlySet<string> = new Set([
  ...GUEST_GLOBALS,
  ...STANDARD_GLOBALS,
  ...JAVASCRIPT_RESERVED_WORDS,
]);

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
