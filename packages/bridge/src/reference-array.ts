/**
 * A new empty array whose elements kind already holds references (strings, objects, functions).
 *
 * V8 starts `[]` with the small-integer elements kind and changes it at the first reference pushed. A
 * `push` on the nested-call path that is optimized while it sees both kinds is thrown away
 * (deoptimized, "not a Smi") when the next fresh `[]` arrives, and that happens once per run or per
 * drain until V8 gives up on it. An array that starts with the kind it ends with never causes that.
 */
export function emptyReferenceArray<T>(): T[] {
  // A literal holding `null` has the general elements kind; emptying it keeps that kind.
  const array: T[] = [null as T];
  array.length = 0;
  return array;
}
