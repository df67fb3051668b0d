// What the engine reads of the model's exec input before running it: its hook metadata and the cell it records.
import type { JsonValue } from "@codecell/contract";
import type { ExecHookMetadata } from "./types.js";

export function hookMetadataOf(input: unknown): ExecHookMetadata {
  const language = (input as { language?: unknown } | null)?.language;
  if (language === "typescript") return { toolKind: "code_mode_exec", toolInputKind: "typescript" };
  if (language === undefined || language === "javascript") {
    return { toolKind: "code_mode_exec", toolInputKind: "javascript" };
  }
  return { toolKind: "code_mode_exec" };
}

/** What the exec control entry records of the model's input: the cell and its language. */
export function cellOf(input: unknown): JsonValue {
  const fields = (typeof input === "object" && input !== null ? input : {}) as Record<string, unknown>;
  const code =
    typeof fields.code === "string"
      ? fields.code
      : typeof fields.command === "string"
        ? fields.command
        : null;
  const language = typeof fields.language === "string" ? fields.language : "javascript";
  return code === null ? { language } : { language, code };
}
