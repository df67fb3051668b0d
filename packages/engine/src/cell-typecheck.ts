import type { GuestSurface } from "@codecell/bridge";
import type { ToolCatalog } from "@codecell/catalog";
import type { CodeModeDiagnostic, CodeModeLanguage, CodeModeResult } from "@codecell/contract";
import type { McpDeclarations } from "@codecell/mcp-declarations";
import { CALL_MARKER_KEY } from "@codecell/namespaces";

// `@codecell/typecheck` is imported on the first cell of an engine whose typecheck is not "off": with it
// off nothing of it, and nothing of the compiler, is ever loaded.
type TypecheckModule = typeof import("@codecell/typecheck");
type Checker = InstanceType<TypecheckModule["CellChecker"]>;
type Declarations = ReturnType<TypecheckModule["guestDeclarations"]>;

/** The findings of a checked cell; null when it was not checked (the sandbox's own checks decide). */
export type CellTypecheck = {
  diagnostics: CodeModeDiagnostic[];
  total: number;
  strictMessage: string;
} | null;

/** One engine's checker: made on the first checked cell, shared by its runs, closed with the engine. */
export class EngineTypecheck {
  #module: Promise<TypecheckModule> | null = null;
  #checker: Checker | null = null;

  #load(): Promise<TypecheckModule> {
    this.#module ??= import("@codecell/typecheck");
    return this.#module;
  }

  async checker(): Promise<{ module: TypecheckModule; checker: Checker }> {
    const module = await this.#load();
    this.#checker ??= new module.CellChecker();
    return { module, checker: this.#checker };
  }

  /** Starts the checker's thread and its compiler before the first cell (a host's warm-up). */
  async warmUp(): Promise<void> {
    const { checker } = await this.checker();
    await checker.warmUp();
  }

  async close(): Promise<void> {
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
  ) {}

  async check(code: string, language: CodeModeLanguage, surface: GuestSurface): Promise<CellTypecheck> {
    const { module, checker } = await this.engine.checker();
    if (this.#declarations?.surface !== surface) {
      this.#declarations = { surface, value: module.guestDeclarations(this.#render(module, surface)) };
    }
    const result = await checker.check({ declarations: this.#declarations.value, code, language });
    if (result.status !== "checked") return null;
    return {
      diagnostics: result.diagnostics,
      total: result.total,
      strictMessage: result.total > 0 ? module.strictFailureMessage(result.diagnostics, result.total) : "",
    };
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

/** The result with the cell's findings attached (warn and strict); unchanged when there are none. */
export function withDiagnostics(result: CodeModeResult, checked: CellTypecheck): CodeModeResult {
  return checked && checked.diagnostics.length > 0 ? { ...result, diagnostics: checked.diagnostics } : result;
}
