import type { CodeModeResult, ToolCatalogEntry, ToolCatalogEntryWithSchema } from "@codecell/contract";

/** What the browser panels need from a session: running a cell. */
export type CellRunner = { exec(code: string, language: "javascript"): Promise<CodeModeResult> };

export type ApiFile = { path: string; description?: string; bytes?: number };

/** A browse cell that did not complete; the message is the gateway's. */
export class BrowseCellError extends Error {
  override readonly name = "BrowseCellError";
  readonly code: string | undefined;
  constructor(message: string, code?: string) {
    super(message);
    this.code = code;
  }
}

/** The largest `tools.search` limit the contract allows (`maxSearchLimit`'s upper bound). */
export const SEARCH_LIMIT = 50;

/**
 * The cells the catalog and API panels run. The page is an MCP client that sees only exec and wait, so
 * it asks the catalog the way a model would: `tools.search` ranks exactly as a cell's search does.
 * Arguments are embedded as JSON literals, which are valid JavaScript string literals.
 */
export const browseCells = {
  allTools: () => "return ALL_TOOLS;",
  search: (query: string, limit = SEARCH_LIMIT) =>
    `return await tools.search(${JSON.stringify(query)}, { limit: ${Math.trunc(limit)} });`,
  describe: (id: string) => `return await tools.describe(${JSON.stringify(id)});`,
  apiList: (prefix = "mcp") => `return await API.list(${JSON.stringify(prefix)});`,
  apiRead: (path: string) => `return await API.read(${JSON.stringify(path)});`,
} as const;

async function completedValue<T>(runner: CellRunner, code: string): Promise<T> {
  const result = await runner.exec(code, "javascript");
  if (result.status === "completed") return result.value as T;
  if (result.status === "failed") throw new BrowseCellError(result.error, result.code);
  throw new BrowseCellError(`The browse cell is waiting (${result.reason}); it should complete at once.`);
}

/** The hidden catalog as cells see it, read through exec. */
export class CatalogService {
  readonly #runner: CellRunner;

  constructor(runner: CellRunner) {
    this.#runner = runner;
  }

  allTools(): Promise<ToolCatalogEntry[]> {
    return completedValue(this.#runner, browseCells.allTools());
  }

  search(query: string, limit = SEARCH_LIMIT): Promise<ToolCatalogEntry[]> {
    return completedValue(this.#runner, browseCells.search(query, limit));
  }

  describe(id: string): Promise<ToolCatalogEntryWithSchema> {
    return completedValue(this.#runner, browseCells.describe(id));
  }

  apiFiles(prefix = "mcp"): Promise<ApiFile[]> {
    return completedValue(this.#runner, browseCells.apiList(prefix));
  }

  apiRead(path: string): Promise<string> {
    return completedValue(this.#runner, browseCells.apiRead(path));
  }
}
