import type { EditorView } from "@codemirror/view";
import type { ApiFile, CatalogService } from "./catalog-service.js";
import { element, formatBytes, replaceChildren } from "./dom.js";
import { createDeclarationViewer } from "./editor.js";

/** The virtual API files: `API.list("mcp")`, and `API.read(path)` for the one picked. */
export class ApiPanel {
  readonly #service: CatalogService;
  readonly #list: HTMLElement;
  readonly #status: HTMLElement;
  readonly #viewer: HTMLElement;
  #view: EditorView | null = null;
  #loaded = false;

  constructor(root: HTMLElement, service: CatalogService) {
    this.#service = service;
    this.#status = element("p", { className: "muted panel-status", "aria-live": "polite" });
    this.#list = element("ul", { className: "file-list", "data-testid": "api-list" });
    this.#viewer = element("div", { className: "declaration", "data-testid": "api-viewer" });
    replaceChildren(root, this.#status, this.#list, this.#viewer);
  }

  ensureLoaded(): void {
    if (this.#loaded) return;
    this.#loaded = true;
    void this.#load();
  }

  async #load(): Promise<void> {
    this.#status.textContent = 'API.list("mcp")…';
    try {
      const files = await this.#service.apiFiles("mcp");
      this.#status.textContent = `${files.length} declaration file${files.length === 1 ? "" : "s"} (virtual, read-only)`;
      replaceChildren(this.#list, ...files.map((file) => this.#row(file)));
      const first = this.#list.querySelector<HTMLButtonElement>("button");
      if (first) first.click();
    } catch (error) {
      this.#status.textContent = `Could not list the API files: ${(error as Error).message}`;
      this.#loaded = false;
    }
  }

  #row(file: ApiFile): HTMLElement {
    const button = element(
      "button",
      { type: "button", className: "file-button", "data-path": file.path },
      element(
        "span",
        { className: "tool-line" },
        element("code", {}, file.path),
        element("span", { className: "muted file-size" }, formatBytes(file.bytes)),
      ),
      file.description ? element("span", { className: "file-description" }, file.description) : null,
    );
    button.addEventListener("click", () => void this.#show(file.path, button));
    return element("li", {}, button);
  }

  async #show(path: string, button: HTMLElement): Promise<void> {
    for (const other of this.#list.querySelectorAll(".file-button[aria-current]"))
      other.removeAttribute("aria-current");
    button.setAttribute("aria-current", "true");
    try {
      const text = await this.#service.apiRead(path);
      this.#view?.destroy();
      replaceChildren(this.#viewer, element("h3", {}, element("code", {}, path)));
      const host = element("div", { className: "declaration-code" });
      this.#viewer.appendChild(host);
      this.#view = createDeclarationViewer(host, text);
    } catch (error) {
      replaceChildren(this.#viewer, element("p", { className: "error-message" }, (error as Error).message));
    }
  }
}
