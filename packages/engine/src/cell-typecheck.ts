import type { GuestSurface } from "@codecell/bridge";
import type { ToolCatalog } from "@codecell/catalog";
import type { CodeModeDiagnostic, CodeModeLanguage, CodeModeResult } from "@codecell/contract";
import type { McpDeclarations } from "@codecell/mcp-declarations";
import { CALL_MARKER_KEY } from "@codecell/namespaces";

// `@codecell/typecheck` is imported when an engine whose typecheck is not "off" prepares its first run
// (or warms up): with it off nothing of it, and nothing of the compiler, is ever loaded.
type TypecheckModule = typeof import("@codecell/typecheck");
type Checker = InstanceType<TypecheckModule["CellChecker"]>;
type Declarations = ReturnType<TypecheckModule["guestDeclarations"]>;
type UnfinishedCause = import("@codecell/typecheck").UnfinishedCause;

/**
 * What the check found: the findings of a checked cell, or why its check did not finish (a timeout, a
 * checker that stopped or failed) with the text "strict" refuses it with and the note "warn" adds;
 * null when it was not checked because it fails its own transpile checks (the sandbox reports those).
 */
export type CellTypecheck =
  | { status: "checked"; diagnostics: CodeModeDiagnostic[]; total: number; strictMessage: string }
  | { status: "unfinished"; reason: string; strictMessage: string; note: string }
  | null;

/**
 * One engine's checker: made on the first prepared run with typecheck on (or the engine's warm-up),
 * shared by its runs, closed with the engine.
 */
export class EngineTypecheck {
  #module: Promise<TypecheckModule> | null = null;
  #checker: Checker | null = null;
  #closed = false;

  /**
   * `timeoutMs`: how long a cell whose turn came may wait for the compiler to load; `budgetMs`: how long
   * its check may keep the compiler busy (at most `timeoutMs`).
   */
  constructor(
    readonly timeoutMs: number,
    readonly budgetMs: number = timeoutMs,
  ) {}

  #load(): Promise<TypecheckModule> {
    this.#module ??= import("@codecell/typecheck");
    return this.#module;
  }

  async checker(): Promise<{ module: TypecheckModule; checker: Checker }> {
    const module = await this.#load();
    // A warm-up or a run's preparation still loading when the engine closed starts no thread after it.
    if (this.#closed) throw new Error("the engine was closed");
    this.#checker ??= new module.CellChecker({ timeoutMs: this.timeoutMs, budgetMs: this.budgetMs });
    return { module, checker: this.#checker };
  }

  /** Starts the checker's thread and its compiler before the first cell (a host's warm-up). */
  async warmUp(): Promise<void> {
    const { checker } = await this.checker();
    await checker.warmUp();
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#checker?.close();
    this.#checker = null;
  }
}

/**
 * A prepared run's side of the check: its declarations, rendered from what its guest is shown (the
 * surface, the catalog's schemas and the MCP declarations API.read serves), again only when the
 * surface changes (a namespace appeared or went), and checked by the engine's warm checker.
 */
export class RunTypecheck {
  #declarations: { surface: GuestSurface; value: Declarations } | null = null;

  constructor(
    private readonly engine: EngineTypecheck,
    private readonly catalog: ToolCatalog,
    private readonly mcp: McpDeclarations,
    /** Whose cells these are (the run's principal): checks are fair between owners. */
    private readonly owner: string = "",
  ) {}

  /**
   * Has the checker build this run's declarations now, so its first cell is a warm check: the thread
   * loads the compiler and the declarations while the model writes that cell. Never rejects (a checker
   * that fails says so on the cell's own check).
   */
  async prepare(surface: GuestSurface): Promise<void> {
    try {
      const { module, checker } = await this.engine.checker();
      await checker.prepare(this.#declarationsFor(module, surface), this.owner);
    } catch {
      // Only a head start is lost.
    }
  }

  async check(code: string, language: CodeModeLanguage, surface: GuestSurface): Promise<CellTypecheck> {
    let result: Awaited<ReturnType<Checker["check"]>>;
    let module: TypecheckModule;
    try {
      const loaded = await this.engine.checker();
      module = loaded.module;
      result = await loaded.checker.check({
        declarations: this.#declarationsFor(module, surface),
        code,
        language,
        owner: this.owner,
      });
    } catch (error) {
      const reason = `the checker could not start: ${error instanceof Error ? error.message : String(error)}`;
      return unfinished(reason, "failed", this.engine);
    }
    if (result.status === "skipped") return null;
    if (result.status === "unfinished") return unfinished(result.reason, result.cause, this.engine);
    return {
      status: "checked",
      diagnostics: result.diagnostics,
      total: result.total,
      strictMessage: result.total > 0 ? module.strictFailureMessage(result.diagnostics, result.total) : "",
    };
  }

  #declarationsFor(module: TypecheckModule, surface: GuestSurface): Declarations {
    if (this.#declarations?.surface !== surface) {
      this.#declarations = { surface, value: module.guestDeclarations(this.#render(module, surface)) };
    }
    return this.#declarations.value;
  }

  #render(module: TypecheckModule, surface: GuestSurface): string {
    return module.renderGuestDeclarations({
      tools: this.catalog.guestEntries.map((entry) => {
        const tool = this.catalog.get(entry.id)?.tool;
        return {
          id: entry.id,
          name: entry.name,
          description: entry.description,
          inputSchema: tool?.parameters,
          ...(tool?.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
        };
      }),
      toolFunctions: surface.toolFunctions,
      mcp: this.mcp,
      mcpAliases: surface.mcpServers,
      namespaces: surface.namespaces,
      callMarkerKey: CALL_MARKER_KEY,
    });
  }
}

/**
 * A cell whose check did not finish: "strict" refuses it with a text that says nothing ran, why the
 * check did not finish (the checker's own, true reason) and the ways out that fit that reason (a cell
 * over the budget will run over again: simpler types or a larger `typecheckBudgetMs`; a compiler still
 * loading may be ready for the same cell now, else a larger `typecheckTimeoutMs`), or "warn"; "warn"
 * runs it and its result carries the short note.
 */
function unfinished(
  reason: string,
  cause: UnfinishedCause,
  limits: Pick<EngineTypecheck, "timeoutMs" | "budgetMs">,
): CellTypecheck {
  const budget = Math.min(limits.budgetMs, limits.timeoutMs);
  // The setting to raise is the one that set the budget: typecheckTimeoutMs caps typecheckBudgetMs.
  const setting =
    limits.timeoutMs < limits.budgetMs
      ? `tools.codeMode.typecheckTimeoutMs (now ${budget} ms), which also caps how long one check may keep the compiler busy,`
      : `tools.codeMode.typecheckBudgetMs (now ${budget} ms, how long one check may keep the compiler busy)`;
  const raise = limits.timeoutMs < limits.budgetMs ? "typecheckTimeoutMs" : "typecheckBudgetMs";
  const warn = 'or set typecheck to "warn", which runs a cell whose check did not finish unchecked';
  const wayOut =
    cause === "budget"
      ? `The cell's types kept the compiler busy past ${setting}, so the same cell will run over again: simplify its types (fewer statements or simpler generics per cell), raise tools.codeMode.${raise}, ${warn}.`
      : cause === "loading"
        ? `Send it again: the compiler goes on loading and may be ready now. If it keeps happening, raise tools.codeMode.typecheckTimeoutMs (now ${limits.timeoutMs} ms), ${warn}.`
        : `Send it again (a checker that stopped is started afresh). If it keeps happening, ${warn}.`;
  return {
    status: "unfinished",
    reason,
    strictMessage: `The cell did not run: tools.codeMode.typecheck is "strict" and the cell's type check did not finish (${reason}), so nothing of it ran and no tool was called. ${wayOut}`,
    note: `The type check did not finish (${reason}); the cell ran unchecked.`,
  };
}

/**
 * The result with what the check found attached (warn and strict): its findings, or in "warn" the note
 * that the check did not finish; unchanged when there is neither.
 */
export function withDiagnostics(result: CodeModeResult, checked: CellTypecheck): CodeModeResult {
  if (checked?.status === "unfinished") return { ...result, typecheckNote: checked.note };
  return checked && checked.diagnostics.length > 0 ? { ...result, diagnostics: checked.diagnostics } : result;
}
