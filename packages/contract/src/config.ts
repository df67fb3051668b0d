import type { z } from "zod";
import { CodeModeError } from "./code-mode-error.js";
import type { JsonObject, JsonValue } from "./json.js";
import { CODE_MODE_LANGUAGES, type CodeModeLanguage } from "./languages.js";
import { schemasOnDemand } from "./lazy-schemas.js";
import { CODE_MODE_LIMITS } from "./limits.js";
import { closestMatches } from "./suggestions.js";

export { CODE_MODE_LANGUAGES, CODE_MODE_LIMITS, type CodeModeLanguage };

export type CodeModeLimitField = keyof typeof CODE_MODE_LIMITS;

const limitFields = Object.keys(CODE_MODE_LIMITS) as CodeModeLimitField[];
const allFields = ["enabled", "runtime", "mode", "languages", "typecheck", "images", ...limitFields] as const;

/**
 * What `typecheck` does with a cell before it runs: "off" (the default) runs it unchecked; "warn" runs it
 * and returns the compiler's diagnostics with the result; "strict" refuses a cell with type errors, with
 * those diagnostics and code `invalid_input`, before it makes any nested call.
 */
export const TYPECHECK_MODES = ["off", "warn", "strict"] as const;
export type TypecheckMode = (typeof TYPECHECK_MODES)[number];

/** What a user may write under `tools.codeMode`: a boolean shorthand or an object. */
export type CodeModeConfigInput =
  | boolean
  | ({
      enabled?: boolean;
      runtime?: "quickjs-wasi";
      mode?: "only";
      languages?: CodeModeLanguage[];
      typecheck?: TypecheckMode;
      images?: boolean;
    } & { [K in CodeModeLimitField]?: number });

/** A field whose value was outside its runtime range and was clamped. */
export type ClampedField = { field: CodeModeLimitField; received: number; applied: number };

export type ResolvedCodeModeConfig = {
  enabled: boolean;
  runtime: "quickjs-wasi";
  mode: "only";
  languages: CodeModeLanguage[];
  typecheck: TypecheckMode;
  /** Whether a cell may show images with `image(source)` (off by default: v1 keeps binary out of cells). */
  images: boolean;
  clamped: ClampedField[];
} & { [K in CodeModeLimitField]: number };

type CodeModeConfigObject = Exclude<CodeModeConfigInput, boolean>;
const knownFields: ReadonlySet<string> = new Set(allFields);

/**
 * A config object `codeModeConfigObjectSchema` (in `./schemas`) accepts as it is, checked without
 * loading zod; else undefined, and zod decides and explains. So this only has to be right when it says
 * yes, which a test checks against the schema on generated configs.
 */
function commonConfigObject(input: object): CodeModeConfigObject | undefined {
  const prototype = Object.getPrototypeOf(input);
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  const object: Record<string, unknown> = {};
  for (const key of Object.keys(input)) {
    if (!knownFields.has(key)) return undefined;
    const value = (input as Record<string, unknown>)[key];
    if (value === undefined) continue;
    const valid =
      key === "enabled" || key === "images"
        ? typeof value === "boolean"
        : key === "runtime"
          ? value === "quickjs-wasi"
          : key === "mode"
            ? value === "only"
            : key === "languages"
              ? Array.isArray(value) &&
                value.length > 0 &&
                value.every((language) => CODE_MODE_LANGUAGES.includes(language))
              : key === "typecheck"
                ? TYPECHECK_MODES.includes(value as TypecheckMode)
                : Number.isSafeInteger(value);
    if (!valid) return undefined;
    object[key] = value;
  }
  return object as CodeModeConfigObject;
}

function allowedFor(field: string): string {
  if (field === "enabled") return "true or false";
  if (field === "images") return "true or false (default false)";
  if (field === "runtime") return '"quickjs-wasi" (the only runtime)';
  if (field === "mode") return '"only" (the only mode)';
  if (field === "languages") return 'a non-empty array of "javascript" and/or "typescript"';
  if (field === "typecheck") return '"off" (default), "warn" or "strict"';
  const limit = CODE_MODE_LIMITS[field as CodeModeLimitField];
  if (limit) {
    return `an integer; the runtime range is ${limit.min}..${limit.max} (default ${limit.default})`;
  }
  return "";
}

function describeValue(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  try {
    const text = JSON.stringify(value);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
  } catch {
    return typeof value;
  }
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = root;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

type ConfigProblem = { path: string; message: string };

function problemsFrom(error: z.ZodError, input: unknown, basePath: string): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const path = [basePath, ...issue.path.map(String), key].join(".");
        const [suggestion] = closestMatches(key, allFields, 1);
        const hint = suggestion ? ` Did you mean "${suggestion}"?` : "";
        problems.push({
          path,
          message: `${path}: unknown key.${hint} Known keys: ${allFields.join(", ")}.`,
        });
      }
      continue;
    }
    const field = String(issue.path[0] ?? "");
    const path = [basePath, ...issue.path.map(String)].join(".");
    const received = describeValue(valueAt(input, issue.path));
    problems.push({ path, message: `${path}: received ${received}; expected ${allowedFor(field)}.` });
  }
  return problems;
}

function invalidConfig(problems: ConfigProblem[]): CodeModeError {
  const details: JsonObject = { problems: problems as unknown as JsonValue };
  const message =
    problems.length === 1
      ? `Invalid code-mode config: ${problems[0]!.message}`
      : `Invalid code-mode config (${problems.length} problems):\n${problems.map((p) => `- ${p.message}`).join("\n")}`;
  return new CodeModeError("invalid_config", message, details);
}

/**
 * Resolves `tools.codeMode` to a complete config. `true` enables it with defaults; `false`, `undefined`
 * or an object without `enabled: true` leave it disabled (other fields never enable it). Throws a
 * CodeModeError with code `invalid_config` naming every problem; out-of-range numbers are clamped.
 */
export function resolveCodeModeConfig(
  input: unknown,
  options: { path?: string } = {},
): ResolvedCodeModeConfig {
  const basePath = options.path ?? "tools.codeMode";
  let object: CodeModeConfigObject;
  if (input === undefined || input === null || typeof input === "boolean") {
    object = { enabled: input === true };
  } else if (typeof input !== "object" || Array.isArray(input)) {
    throw invalidConfig([
      {
        path: basePath,
        message: `${basePath}: received ${describeValue(input)}; expected true, false, or an object such as { enabled: true }.`,
      },
    ]);
  } else {
    const common = commonConfigObject(input);
    if (common) {
      object = common;
    } else {
      const parsed = schemasOnDemand().codeModeConfigObjectSchema.safeParse(input);
      if (!parsed.success) throw invalidConfig(problemsFrom(parsed.error, input, basePath));
      object = parsed.data;
    }
  }

  const clamped: ClampedField[] = [];
  const clamp = (field: CodeModeLimitField, max: number): number => {
    const limit = CODE_MODE_LIMITS[field];
    const received = object[field] ?? limit.default;
    const applied = Math.min(max, Math.max(limit.min, received));
    if (applied !== received) clamped.push({ field, received, applied });
    return applied;
  };
  const limits = {} as { [K in CodeModeLimitField]: number };
  for (const field of limitFields) {
    if (field === "searchDefaultLimit") continue;
    limits[field] = clamp(field, CODE_MODE_LIMITS[field].max);
  }
  limits.searchDefaultLimit = clamp("searchDefaultLimit", limits.maxSearchLimit);

  return {
    enabled: object.enabled === true,
    runtime: "quickjs-wasi",
    mode: "only",
    languages: object.languages ? [...new Set(object.languages)] : [...CODE_MODE_LANGUAGES],
    typecheck: object.typecheck ?? "off",
    images: object.images === true,
    ...limits,
    clamped,
  };
}
