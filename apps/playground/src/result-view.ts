import type { CodeModeDiagnostic, CodeModeOutput, CodeModeResult } from "@codecell/contract";
import { element, formatDuration } from "./dom.js";
import { type ErrorLocation, errorLocation } from "./error-location.js";
import { renderJsonTree } from "./json-tree.js";

export type ResultViewOptions = {
  /** Which call produced the result, shown beside the badge. */
  via: "exec" | "wait";
  /** Time from sending the call to its answer, as the page measured it. */
  roundTripMs?: number;
  /** Called when the user picks the line an error points to. */
  onShowLine?: (location: ErrorLocation) => void;
};

const REASONS: Record<string, string> = {
  yield: "the cell called yield_control",
  pending_tools: "nested tool calls are still running",
};

/** The badge text: the status, with the reason while waiting and the code when failed. */
export function statusLabel(result: CodeModeResult): string {
  if (result.status === "waiting") return `waiting · ${result.reason}`;
  if (result.status === "failed") return result.code ? `failed · ${result.code}` : "failed";
  return "completed";
}

export function statusBadge(result: CodeModeResult): HTMLElement {
  return element(
    "span",
    { className: `badge badge-${result.status}`, "data-testid": "status" },
    statusLabel(result),
  );
}

/** One output item: text as text, JSON as a tree, an image as an image. */
export function renderOutputItem(item: CodeModeOutput, index: number): HTMLElement {
  const label = element("span", { className: "output-kind" }, `${index + 1} · ${item.type}`);
  if (item.type === "text") {
    return element(
      "li",
      { className: "output-item output-text" },
      label,
      element("pre", { className: "output-pre" }, item.text),
    );
  }
  if (item.type === "image") {
    // The type is one of the contract's image types and the data base64, checked by the sandbox.
    return element(
      "li",
      { className: "output-item output-image" },
      label,
      element("img", { src: `data:${item.mimeType};base64,${item.data}`, alt: `image ${index + 1}` }),
    );
  }
  return element(
    "li",
    { className: "output-item output-json" },
    label,
    renderJsonTree(item.value, { openDepth: 1 }),
  );
}

function section(title: string, testId: string, ...children: Array<Node | string>): HTMLElement {
  return element(
    "section",
    { className: "result-section", "data-testid": testId },
    element("h3", {}, title),
    ...children,
  );
}

function renderError(message: string, code: string | undefined, options: ResultViewOptions): HTMLElement {
  const location = errorLocation(message);
  const where = location
    ? element(
        "button",
        {
          type: "button",
          className: "link-button",
          "data-testid": "error-line",
          onclick: () => options.onShowLine?.(location),
        },
        `line ${location.line}${location.column === undefined ? "" : `, column ${location.column}`}`,
      )
    : null;
  return section(
    "Error",
    "error",
    element(
      "div",
      { className: "error-box", role: "alert" },
      code ? element("code", { className: "error-code" }, code) : null,
      element("p", { className: "error-message" }, message),
      where ? element("p", { className: "error-where" }, "Points to ", where, " of the cell.") : null,
    ),
  );
}

/**
 * The type check's findings (`tools.codeMode.typecheck` "warn" or "strict"), each with the place it
 * points to as a button that shows that line in the editor, and the properties a tool accepts.
 */
function renderDiagnostics(diagnostics: CodeModeDiagnostic[], options: ResultViewOptions): HTMLElement {
  return section(
    `Type check (${diagnostics.length})`,
    "diagnostics",
    element(
      "ol",
      { className: "diagnostic-list" },
      ...diagnostics.map((item) =>
        element(
          "li",
          { className: "diagnostic", "data-testid": "diagnostic" },
          element(
            "button",
            {
              type: "button",
              className: "link-button",
              onclick: () => options.onShowLine?.({ line: item.line, column: item.column }),
            },
            `line ${item.line}, column ${item.column}`,
          ),
          " ",
          element("code", { className: "error-code" }, item.code),
          element("p", { className: "diagnostic-message" }, item.message),
          item.accepts
            ? element(
                "p",
                { className: "muted diagnostic-accepts" },
                "Accepts: ",
                ...item.accepts.flatMap((name, index) => [index > 0 ? ", " : "", element("code", {}, name)]),
              )
            : null,
        ),
      ),
    ),
  );
}

function renderPending(result: Extract<CodeModeResult, { status: "waiting" }>): HTMLElement {
  const calls = result.pendingToolCalls ?? [];
  const body =
    calls.length === 0
      ? element("p", { className: "muted" }, "No nested call is in flight.")
      : element(
          "table",
          { className: "pending-table" },
          element(
            "thead",
            {},
            element(
              "tr",
              {},
              element("th", {}, "call"),
              element("th", {}, "tool"),
              element("th", {}, "started"),
            ),
          ),
          element(
            "tbody",
            {},
            ...calls.map((call) =>
              element(
                "tr",
                {},
                element("td", {}, call.callId),
                element("td", {}, element("code", {}, call.toolId)),
                element("td", {}, new Date(call.startedAt).toLocaleTimeString()),
              ),
            ),
          ),
        );
  return section("Pending calls", "pending", body);
}

/**
 * A code-mode result: the status badge, then what the status carries (waiting: reason, runId and the
 * pending calls; failed: the message, its code and the line it points to), the final value, and the
 * output items in the order the cell produced them.
 */
export function renderResult(result: CodeModeResult, options: ResultViewOptions): HTMLElement {
  const header = element(
    "div",
    { className: "result-header" },
    statusBadge(result),
    element(
      "span",
      { className: "muted", title: "time in the gateway, and the whole round trip seen from this page" },
      `${options.via} · ${formatDuration(result.telemetry?.durationMs)}`,
      options.roundTripMs === undefined ? "" : ` · round trip ${formatDuration(options.roundTripMs)}`,
    ),
  );
  const parts: HTMLElement[] = [header];
  if (result.status === "waiting") {
    parts.push(
      element(
        "p",
        { className: "waiting-note", "data-testid": "waiting-reason" },
        `Waiting because ${REASONS[result.reason] ?? result.reason}. Run `,
        element("code", {}, "wait"),
        " with runId ",
        element("code", { "data-testid": "run-id" }, result.runId),
        " to continue (the Wait button, or Ctrl+Shift+Enter).",
      ),
    );
    parts.push(renderPending(result));
  }
  if (result.status === "failed") parts.push(renderError(result.error, result.code, options));
  if (result.status === "completed") {
    parts.push(
      section(
        "Value",
        "value",
        result.value === undefined
          ? element("p", { className: "muted" }, "The cell returned nothing (undefined).")
          : renderJsonTree(result.value, { openDepth: 2 }),
      ),
    );
  }
  if (result.diagnostics?.length) parts.push(renderDiagnostics(result.diagnostics, options));
  if (result.typecheckNote) {
    parts.push(
      section("Type check", "typecheck-note", element("p", { className: "muted" }, result.typecheckNote)),
    );
  }
  const output = result.output ?? [];
  parts.push(
    section(
      `Output (${output.length})`,
      "output",
      output.length === 0
        ? element("p", { className: "muted" }, "No text() or json() output.")
        : element("ol", { className: "output-list" }, ...output.map(renderOutputItem)),
    ),
  );
  return element("div", { className: `result result-${result.status}`, "data-testid": "result" }, ...parts);
}
