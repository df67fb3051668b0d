import type { ToolCatalogEntry } from "@codecell/contract";
import type { CatalogService } from "./catalog-service.js";
import { element, replaceChildren } from "./dom.js";
import { renderJsonTree } from "./json-tree.js";

export type CatalogPanelOptions = {
  /** Puts a call of the chosen tool into the editor. */
  onInsertCall: (entry: ToolCatalogEntry) => void;
};

const SEARCH_DELAY_MS = 200;

/** A cell line that calls `entry` by id, for "Insert call". */
export function callSnippet(entry: ToolCatalogEntry): string {
  return `const result = await tools.call(${JSON.stringify(entry.id)}, {});\n`;
}

/**
 * The catalog browser: ALL_TOOLS when the search box is empty, else `tools.search(query)` run in a
 * cell, so the order is the ranking a cell gets. Picking a tool runs `tools.describe(id)`.
 */
export class CatalogPanel {
  readonly #service: CatalogService;
  readonly #options: CatalogPanelOptions;
  readonly #list: HTMLElement;
  readonly #detail: HTMLElement;
  readonly #status: HTMLElement;
  readonly #input: HTMLInputElement;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #generation = 0;
  #loaded = false;

  constructor(root: HTMLElement, service: CatalogService, options: CatalogPanelOptions) {
    this.#service = service;
    this.#options = options;
    this.#input = element("input", {
      type: "search",
      className: "search-input",
      placeholder: "Search the catalog, e.g. read a file",
      "aria-label": "Search the tool catalog (tools.search)",
      "data-testid": "catalog-search",
    });
    this.#status = element("p", { className: "muted panel-status", "aria-live": "polite" });
    this.#list = element("ul", { className: "tool-list", "data-testid": "catalog-list" });
    this.#detail = element("div", { className: "tool-detail", "data-testid": "catalog-detail" });
    this.#input.addEventListener("input", () => {
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => void this.refresh(), SEARCH_DELAY_MS);
    });
    this.#input.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      clearTimeout(this.#timer);
      void this.refresh();
    });
    replaceChildren(
      root,
      this.#input,
      this.#status,
      this.#list,
      element(
        "p",
        { className: "muted hint" },
        "MCP tools are not in ALL_TOOLS: cells call them as MCP.<server>.<tool>() (see the API tab).",
      ),
      this.#detail,
    );
  }

  /** Loads ALL_TOOLS the first time the panel is shown. */
  ensureLoaded(): void {
    if (this.#loaded) return;
    this.#loaded = true;
    void this.refresh();
  }

  async refresh(): Promise<void> {
    const generation = ++this.#generation;
    const query = this.#input.value.trim();
    this.#status.textContent = query ? `Searching for "${query}"…` : "Loading ALL_TOOLS…";
    try {
      const entries = query ? await this.#service.search(query) : await this.#service.allTools();
      if (generation !== this.#generation) return;
      this.#status.textContent = query
        ? `${entries.length} match${entries.length === 1 ? "" : "es"} for "${query}", ranked by tools.search`
        : `ALL_TOOLS: ${entries.length} tools`;
      replaceChildren(this.#list, ...entries.map((entry) => this.#row(entry)));
    } catch (error) {
      if (generation !== this.#generation) return;
      this.#status.textContent = `Could not read the catalog: ${(error as Error).message}`;
      this.#loaded = false;
    }
  }

  #row(entry: ToolCatalogEntry): HTMLElement {
    const button = element(
      "button",
      { type: "button", className: "tool-button", "data-tool-id": entry.id },
      element(
        "span",
        { className: "tool-line" },
        element("strong", {}, entry.label ?? entry.name),
        element("span", { className: `source source-${entry.source}` }, entry.sourceName ?? entry.source),
      ),
      element("code", { className: "tool-id" }, entry.id),
      element("span", { className: "tool-description" }, entry.description),
    );
    button.addEventListener("click", () => void this.#describe(entry, button));
    return element("li", {}, button);
  }

  async #describe(entry: ToolCatalogEntry, button: HTMLElement): Promise<void> {
    for (const other of this.#list.querySelectorAll(".tool-button[aria-current]")) {
      other.removeAttribute("aria-current");
    }
    button.setAttribute("aria-current", "true");
    replaceChildren(this.#detail, element("p", { className: "muted" }, `tools.describe("${entry.id}")…`));
    try {
      const described = await this.#service.describe(entry.id);
      const insert = element("button", { type: "button", className: "small" }, "Insert call in the editor");
      insert.addEventListener("click", () => this.#options.onInsertCall(entry));
      replaceChildren(
        this.#detail,
        element(
          "div",
          { className: "tool-detail-header" },
          element("h3", {}, element("code", {}, described.id)),
          insert,
        ),
        element("p", {}, described.description),
        element("h4", {}, "parameters"),
        renderJsonTree(described.parameters, { openDepth: 3 }),
      );
    } catch (error) {
      replaceChildren(this.#detail, element("p", { className: "error-message" }, (error as Error).message));
    }
  }
}
