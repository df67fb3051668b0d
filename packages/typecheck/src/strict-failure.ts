import type { CodeModeDiagnostic } from "@codecell/contract";

/**
 * The error text of a cell refused by typecheck "strict": how many errors, the first one where it is,
 * and that nothing ran, so the model fixes the cell instead of wondering what happened to its calls.
 */
export function strictFailureMessage(diagnostics: readonly CodeModeDiagnostic[], total: number): string {
  const first = diagnostics[0];
  const count = `${total} type error${total === 1 ? "" : "s"}`;
  const where = first
    ? ` First: ${first.file}:${first.line}:${first.column} ${first.code} ${first.message}`
    : "";
  const more = total > diagnostics.length ? ` (the first ${diagnostics.length} are in diagnostics)` : "";
  return `The cell has ${count}${more} and did not run (tools.codeMode.typecheck is "strict"); nothing of it ran, no tool was called.${where} Fix the cell and run it again.`;
}
