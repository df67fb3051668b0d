/**
 * What the values a run's nested calls returned looked like, per tool id, so a failure message can say
 * what a name holds (`t holds an object with keys path, content, bytes`). Only a shape every call of the
 * tool agreed on is kept: two calls of one tool that returned different shapes give no answer.
 */
export class ResultShapes {
  readonly #byTool = new Map<string, string | null>();

  record(toolId: string, value: unknown): void {
    const shape = describeValue(value);
    const known = this.#byTool.get(toolId);
    // A loop calling one tool records the same shape again and again: nothing changes then.
    if (known === shape) return;
    this.#byTool.set(toolId, known === undefined ? shape : null);
  }

  /** The shape every result of `toolId` had in this run, or null (none, or they differed). */
  of(toolId: string): string | null {
    return this.#byTool.get(toolId) ?? null;
  }
}

const MAX_KEYS = 8;
// Constant words for primitives, so recording a loop's results builds no string per call.
const PRIMITIVE_SHAPES: Readonly<Record<string, string>> = {
  string: "a string",
  number: "a number",
  boolean: "a boolean",
  bigint: "a bigint",
  symbol: "a symbol",
  function: "a function",
};

function keysOf(value: object): string {
  const keys = Object.keys(value);
  if (keys.length === 0) return "no keys";
  const shown = keys.slice(0, MAX_KEYS).join(", ");
  return `${keys.length === 1 ? "key" : "keys"} ${shown}${keys.length > MAX_KEYS ? ` and ${keys.length - MAX_KEYS} more` : ""}`;
}

/** A JSON value's shape in words: `an object with keys path, content`, `an array whose first item is a string`. */
export function describeValue(value: unknown, nested = false): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (Array.isArray(value)) {
    if (value.length === 0) return "an empty array";
    if (nested) return "an array";
    return `an array whose first item is ${describeValue(value[0], true)}`;
  }
  if (typeof value === "object") return `an object with ${keysOf(value)}`;
  return PRIMITIVE_SHAPES[typeof value] ?? `a ${typeof value}`;
}
