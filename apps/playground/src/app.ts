import type { CodeModeLanguage, CodeModeResult } from "@codecell/contract";
import { ApiPanel } from "./api-panel.js";
import { createApprovalPrompt } from "./approval-dialog.js";
import { CatalogPanel, callSnippet } from "./catalog-panel.js";
import { CatalogService } from "./catalog-service.js";
import { element, replaceChildren } from "./dom.js";
import { CellEditor } from "./editor.js";
import { errorLocation } from "./error-location.js";
import { EXAMPLES, exampleById } from "./examples.js";
import { GatewayCallError, GatewaySession } from "./gateway-session.js";
import { renderResult } from "./result-view.js";
import { setupTabs } from "./tabs.js";
import { renderTelemetry } from "./telemetry-view.js";
import { buildTrajectoryTree, renderTrajectory } from "./trajectory-view.js";

function byId<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`The page is missing #${id}; index.html and app.ts disagree.`);
  return found as T;
}

/** Wires the page: one MCP session for the user's cells, one for the catalog and API panels. */
export async function startPlayground(): Promise<void> {
  const endpoint = new URL("/mcp", window.location.href);
  const connection = byId<HTMLElement>("connection");
  const runButton = byId<HTMLButtonElement>("run");
  const waitButton = byId<HTMLButtonElement>("wait");
  const resultArea = byId<HTMLElement>("result");
  const examplesSelect = byId<HTMLSelectElement>("examples");
  const summary = byId<HTMLElement>("example-summary");
  const trajectoryPanel = byId<HTMLElement>("panel-trajectory");
  const telemetryPanel = byId<HTMLElement>("panel-telemetry");
  const languageInputs = [...document.querySelectorAll<HTMLInputElement>('input[name="language"]')];

  const isMac = /Mac|iPhone|iPad/.test(navigator.platform);
  for (const kbd of document.querySelectorAll<HTMLElement>("kbd[data-mod]")) {
    kbd.textContent = isMac ? "⌘ Enter" : "Ctrl+Enter";
  }
  for (const kbd of document.querySelectorAll<HTMLElement>("kbd[data-mod-shift]")) {
    kbd.textContent = isMac ? "⌘ Shift Enter" : "Ctrl+Shift+Enter";
  }

  // The user's cells run in their own session so the trajectory shows only them; the catalog and API
  // panels ask through a second session (both are ordinary MCP sessions of this page).
  const workbench = new GatewaySession(endpoint, {
    clientName: "codecell-playground",
    approve: createApprovalPrompt(byId<HTMLDialogElement>("approval")),
  });
  const browser = new GatewaySession(endpoint, { clientName: "codecell-playground-browser" });
  const service = new CatalogService(browser);

  let language: CodeModeLanguage = "javascript";
  let lastResult: CodeModeResult | null = null;
  let busy = false;
  // Counts finished exec/wait calls; tests wait on it instead of guessing when a result replaced the last.
  let settled = 0;

  const editor = new CellEditor(byId("editor"), {
    doc: "",
    language,
    onRun: () => void run(),
    onWait: () => void resume(),
  });

  const catalogPanel = new CatalogPanel(byId("panel-catalog"), service, {
    onInsertCall: (entry) => {
      const code = editor.code;
      editor.setCode(`${code}${code.endsWith("\n") || code === "" ? "" : "\n"}${callSnippet(entry)}`);
      editor.focus();
    },
  });
  const apiPanel = new ApiPanel(byId("panel-api"), service);
  replaceChildren(
    trajectoryPanel,
    element("p", { className: "muted empty" }, "No exec or wait call yet in this session. Run a cell."),
  );
  replaceChildren(telemetryPanel, renderTelemetry(undefined));
  setupTabs(document.querySelector<HTMLElement>('[role="tablist"]')!, (tab) => {
    if (tab === "catalog") catalogPanel.ensureLoaded();
    if (tab === "api") apiPanel.ensureLoaded();
  });

  function setLanguage(next: CodeModeLanguage): void {
    language = next;
    for (const input of languageInputs) input.checked = input.value === next;
    editor.setLanguage(next);
  }
  for (const input of languageInputs) {
    input.addEventListener("change", () => {
      if (input.checked) setLanguage(input.value as CodeModeLanguage);
    });
  }

  for (const example of EXAMPLES) {
    examplesSelect.appendChild(element("option", { value: example.id }, example.title));
  }
  function loadExample(id: string): void {
    const example = exampleById(id);
    if (!example) return;
    examplesSelect.value = example.id;
    summary.textContent = example.summary;
    editor.setCode(example.code);
    setLanguage(example.language);
  }
  examplesSelect.addEventListener("change", () => loadExample(examplesSelect.value));
  loadExample(new URLSearchParams(window.location.search).get("example") ?? EXAMPLES[0]!.id);

  function updateButtons(): void {
    runButton.disabled = busy || !connected;
    waitButton.disabled = busy || !connected || lastResult?.status !== "waiting";
  }

  function showBusy(label: string): void {
    replaceChildren(
      resultArea,
      element(
        "div",
        { className: "running", "data-testid": "running" },
        element("span", { className: "spinner" }),
        label,
      ),
    );
  }

  function showTransportError(error: unknown): void {
    replaceChildren(
      resultArea,
      element(
        "div",
        { className: "error-box", role: "alert", "data-testid": "transport-error" },
        element(
          "strong",
          {},
          error instanceof GatewayCallError
            ? "The gateway did not run the call. "
            : "The gateway could not be reached. ",
        ),
        element("span", {}, (error as Error).message ?? String(error)),
        error instanceof GatewayCallError
          ? null
          : element(
              "p",
              { className: "muted" },
              "Check that codecell serve --http is still running, then press Run again.",
            ),
      ),
    );
  }

  async function refreshTrajectory(): Promise<void> {
    try {
      const trajectory = await workbench.trajectory();
      replaceChildren(trajectoryPanel, renderTrajectory(buildTrajectoryTree(trajectory.entries)));
    } catch (error) {
      replaceChildren(
        trajectoryPanel,
        element(
          "p",
          { className: "error-message" },
          `Could not read the trajectory: ${(error as Error).message}`,
        ),
      );
    }
  }

  async function perform(via: "exec" | "wait", call: () => Promise<CodeModeResult>): Promise<void> {
    if (busy) return;
    busy = true;
    updateButtons();
    editor.markErrorLine(null);
    showBusy(via === "exec" ? "Running the cell…" : "Waiting for the run to continue…");
    const started = performance.now();
    try {
      const result = await call();
      const roundTripMs = performance.now() - started;
      resultArea.dataset.roundTripMs = roundTripMs.toFixed(2);
      lastResult = result;
      replaceChildren(
        resultArea,
        renderResult(result, {
          via,
          roundTripMs,
          onShowLine: (location) => editor.markErrorLine(location.line, true),
        }),
      );
      if (result.status === "failed") editor.markErrorLine(errorLocation(result.error)?.line ?? null);
      replaceChildren(telemetryPanel, renderTelemetry(result.telemetry));
      await refreshTrajectory();
    } catch (error) {
      lastResult = null;
      showTransportError(error);
    } finally {
      // Call, result, telemetry and trajectory all rendered: what the user waited for (read by the bench).
      resultArea.dataset.totalMs = (performance.now() - started).toFixed(2);
      resultArea.dataset.settled = String(++settled);
      busy = false;
      updateButtons();
      if (lastResult?.status === "waiting") waitButton.focus();
    }
  }

  async function run(): Promise<void> {
    const code = editor.code;
    await perform("exec", () => workbench.exec(code, language));
  }

  async function resume(): Promise<void> {
    if (lastResult?.status !== "waiting") return;
    const runId = lastResult.runId;
    await perform("wait", () => workbench.wait(runId));
  }

  runButton.addEventListener("click", () => void run());
  waitButton.addEventListener("click", () => void resume());
  // Outside the editor too: Mod+Enter runs, Mod+Shift+Enter waits.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey) || event.defaultPrevented) return;
    event.preventDefault();
    void (event.shiftKey ? resume() : run());
  });

  let connected = false;
  try {
    await workbench.connect();
    connected = true;
    connection.dataset.state = "connected";
    replaceChildren(
      connection,
      element("span", { className: "dot", "aria-hidden": "true" }),
      `Connected to ${workbench.serverName || "the gateway"} ${workbench.serverVersion}`,
      element("span", { className: "muted connection-endpoint" }, ` · ${endpoint.pathname}`),
    );
  } catch (error) {
    connection.dataset.state = "failed";
    replaceChildren(
      connection,
      element("span", { className: "dot", "aria-hidden": "true" }),
      "Not connected",
    );
    showTransportError(error);
  }
  updateButtons();
  window.addEventListener("pagehide", () => {
    void workbench.close();
    void browser.close();
  });
}
