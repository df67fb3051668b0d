import { closestMatches } from "@codecell/contract";
import type { z } from "zod";
import { describeValue } from "./config-problem.js";

/**
 * Config messages in our own words. The validator's issue says what kind of thing went wrong; the text a
 * user reads is written here, so no validator wording ever reaches them, whatever fields the schema grows.
 */

type Issue = z.core.$ZodIssue;
type SchemaDef = { type: string } & Record<string, unknown>;

function defOf(schema: unknown): SchemaDef | undefined {
  return (schema as { _zod?: { def?: SchemaDef } } | undefined)?._zod?.def;
}

/** The schemas that may describe the value at `path` (a union gives several). */
function schemasAt(schema: unknown, path: readonly PropertyKey[]): unknown[] {
  const def = defOf(schema);
  if (!def) return [];
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "readonly":
    case "catch":
    case "nonoptional":
      return schemasAt(def.innerType, path);
    case "pipe":
      return schemasAt(def.in, path);
    case "lazy":
      return schemasAt((def.getter as () => unknown)(), path);
    case "union":
      return (def.options as unknown[]).flatMap((option) => schemasAt(option, path));
    case "intersection":
      return [...schemasAt(def.left, path), ...schemasAt(def.right, path)];
  }
  if (path.length === 0) return [schema];
  const [head, ...rest] = path;
  if (def.type === "object") {
    const shape = def.shape as Record<string, unknown>;
    return Object.hasOwn(shape, String(head)) ? schemasAt(shape[String(head)], rest) : [];
  }
  if (def.type === "record") return schemasAt(def.valueType, rest);
  if (def.type === "array") return schemasAt(def.element, rest);
  return [];
}

/** The keys an object at `path` of `schema` accepts, in the schema's order (several shapes merged). */
export function knownKeysAt(schema: unknown, path: readonly PropertyKey[]): string[] {
  const keys = new Set<string>();
  for (const candidate of schemasAt(schema, path)) {
    const def = defOf(candidate);
    if (def?.type === "object") for (const key of Object.keys(def.shape as object)) keys.add(key);
  }
  return [...keys];
}

/** The literal values allowed at `path` (an enum, literals, a discriminator), for "allowed: ..." hints. */
function allowedValuesAt(schema: unknown, path: readonly PropertyKey[]): unknown[] {
  const values: unknown[] = [];
  for (const candidate of schemasAt(schema, path)) {
    const def = defOf(candidate);
    if (def?.type === "enum") values.push(...Object.values(def.entries as object));
    if (def?.type === "literal") values.push(...(def.values as unknown[]));
  }
  return [...new Set(values)];
}

export function unknownKeyMessage(key: string, known: readonly string[]): string {
  const [suggestion] = closestMatches(key, known, 1);
  const didYouMean = suggestion ? ` Did you mean "${suggestion}"?` : "";
  return `unknown key.${didYouMean}${known.length ? ` Known keys: ${known.join(", ")}.` : " Remove it."}`;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return "a string";
  if (typeof value === "number") return Number.isInteger(value) ? "a whole number" : "a number";
  if (typeof value === "boolean") return "true or false";
  return typeof value;
}

const EXPECTED_KIND: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "a whole number",
  boolean: "true or false",
  array: "an array",
  object: "an object",
  record: "an object",
  null: "null",
};

const FORMAT_NAMES: Record<string, string> = {
  url: "URL",
  email: "email address",
  uuid: "UUID",
  regex: "name",
};

function sizeReason(issue: Issue & { minimum?: unknown; maximum?: unknown; origin?: string }): string {
  const small = issue.code === "too_small";
  const limit = Number(small ? issue.minimum : issue.maximum);
  switch (issue.origin) {
    case "string":
      if (small && limit === 1) return "it must not be empty";
      return `it must be ${small ? "at least" : "at most"} ${limit} characters long`;
    case "array":
    case "set":
      if (small && limit === 1) return "it needs at least one entry";
      return `it needs ${small ? "at least" : "at most"} ${limit} entries`;
    default:
      return `it must be ${small ? "at least" : "at most"} ${limit}`;
  }
}

/**
 * One sentence for one validator issue: what was found, why it is not accepted, and what is (from the
 * field hint when there is one, else from the schema).
 */
export function issueMessage(
  issue: Issue,
  received: unknown,
  options: { schema: unknown; path: readonly PropertyKey[]; hint?: string; shown?: string },
): string {
  const got = `got ${options.shown ?? describeValue(received)}`;
  const allowed = allowedValuesAt(options.schema, options.path);
  const expected = options.hint
    ? ` Expected ${options.hint}.`
    : allowed.length
      ? ` Allowed: ${allowed.map((value) => JSON.stringify(value)).join(", ")}.`
      : "";
  let reason: string;
  switch (issue.code) {
    case "invalid_type":
      reason =
        received === undefined
          ? "this field is required"
          : `that is ${kindOf(received)}, not ${EXPECTED_KIND[issue.expected] ?? issue.expected}`;
      break;
    case "too_small":
    case "too_big":
      reason = sizeReason(issue);
      break;
    case "invalid_value":
      reason = "that value is not one of the allowed ones";
      if (!options.hint && !allowed.length) {
        return `${got}: that value is not allowed. Allowed: ${issue.values.map((value) => JSON.stringify(value)).join(", ")}.`;
      }
      break;
    case "invalid_format":
      reason = `that is not a valid ${FORMAT_NAMES[issue.format] ?? issue.format}`;
      break;
    case "invalid_union":
      // A discriminated union names its allowed tags; any other union lists no single value.
      reason = Array.isArray((issue as { options?: unknown }).options)
        ? "that value is not one of the allowed ones"
        : `that is ${kindOf(received)}, which is none of the accepted forms`;
      break;
    case "invalid_key":
      return `${describeValue(options.path.at(-1))} is not an accepted name.${expected}`;
    case "not_multiple_of":
      reason = `it must be a multiple of ${issue.divisor}`;
      break;
    default:
      reason = "that is not accepted here";
  }
  return `${got}: ${reason}.${expected}`;
}
