import {
  CODE_MODE_LIMITS,
  CodeModeError,
  type ResolvedCodeModeConfig,
  resolveCodeModeConfig,
} from "@codecell/contract";
import type { ConfigProblem } from "./config-problem.js";

/**
 * The `tools.codeMode` section, checked by the contract. A limit outside its runtime range is clamped,
 * not refused: the clamp is a warning, given also when another field is invalid so one `check` run shows
 * both.
 */

type Clamp = { field: string; received: number; applied: number };

function clampWarning(file: string, clamp: Clamp): string {
  return `${file}: tools.codeMode.${clamp.field}: ${clamp.received} is outside its range; using ${clamp.applied}.`;
}

/** The numeric code-mode limits a config sets outside their runtime range, as the contract would clamp them. */
function clampsOf(raw: unknown): Clamp[] {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return [];
  const clamps: Clamp[] = [];
  for (const [field, limit] of Object.entries(CODE_MODE_LIMITS)) {
    const received = (raw as Record<string, unknown>)[field];
    if (typeof received !== "number" || !Number.isInteger(received)) continue;
    const applied = Math.min(limit.max, Math.max(limit.min, received));
    if (applied !== received) clamps.push({ field, received, applied });
  }
  return clamps;
}

/** The resolved section (null when it is invalid, its problems added) and the clamp warnings. */
export function resolveCodeMode(
  raw: unknown,
  file: string,
  problems: ConfigProblem[],
): { codeMode: ResolvedCodeModeConfig | null; warnings: string[] } {
  try {
    const codeMode = resolveCodeModeConfig(raw);
    return { codeMode, warnings: codeMode.clamped.map((clamp) => clampWarning(file, clamp)) };
  } catch (error) {
    if (!CodeModeError.is(error)) throw error;
    // The contract stops at the first invalid field; the limits it would have clamped are still news.
    const warnings = clampsOf(raw).map((clamp) => clampWarning(file, clamp));
    const listed = (error.details?.problems as Array<{ path: string; message: string }> | undefined) ?? [];
    if (listed.length === 0) problems.push({ file, path: "tools.codeMode", message: error.message });
    for (const problem of listed) {
      problems.push({ file, path: problem.path, message: problem.message.replace(`${problem.path}: `, "") });
    }
    return { codeMode: null, warnings };
  }
}
