import type { CodeModeTelemetry } from "@codecell/contract";
import { element, formatBytes, formatDuration } from "./dom.js";

type Row = [label: string, value: string | number];

/** The counters of one result as label/value rows, in the order the panel shows them. */
export function telemetryRows(telemetry: CodeModeTelemetry): Row[] {
  const { nested, catalog, limitFailures } = telemetry;
  const sources = Object.entries(catalog.bySource)
    .filter(([, count]) => count > 0)
    .map(([source, count]) => `${source} ${count}`)
    .join(", ");
  const limits = Object.entries(limitFailures)
    .filter(([, count]) => count > 0)
    .map(([kind, count]) => `${kind} ${count}`)
    .join(", ");
  return [
    ["duration", formatDuration(telemetry.durationMs)],
    ["tools the model sees", telemetry.visibleToolNames.join(", ") || "none"],
    ["catalog size", sources ? `${catalog.size} (${sources})` : catalog.size],
    ["exec calls", telemetry.execCount],
    ["wait calls", telemetry.waitCount],
    ["nested searches", nested.searches],
    ["nested describes", nested.describes],
    ["nested calls", nested.calls],
    ["failed nested calls", nested.failedCalls],
    ["limit failures", limits || "none"],
  ];
}

/** The telemetry of the last result: counters, the nested tool ids in call order, snapshot events. */
export function renderTelemetry(telemetry: CodeModeTelemetry | undefined): HTMLElement {
  if (!telemetry) return element("p", { className: "muted empty" }, "Run a cell to see its telemetry.");
  const table = element(
    "table",
    { className: "kv-table", "data-testid": "telemetry-table" },
    element(
      "tbody",
      {},
      ...telemetryRows(telemetry).map(([label, value]) =>
        element("tr", {}, element("th", { scope: "row" }, label), element("td", {}, String(value))),
      ),
    ),
  );
  const ids = telemetry.nested.toolIds;
  const events = telemetry.snapshotEvents;
  return element(
    "div",
    { className: "telemetry" },
    table,
    element("h3", {}, `Nested tool ids (${ids.length})`),
    ids.length === 0
      ? element("p", { className: "muted" }, "No nested tool call.")
      : element(
          "ol",
          { className: "id-list" },
          ...ids.map((id) => element("li", {}, element("code", {}, id))),
        ),
    element("h3", {}, `Snapshot events (${events.length})`),
    events.length === 0
      ? element("p", { className: "muted" }, "None.")
      : element(
          "ul",
          { className: "id-list" },
          ...events.map((event) =>
            element(
              "li",
              {},
              element("strong", {}, event.event),
              " ",
              element("code", {}, event.runId),
              event.bytes === undefined ? "" : ` · ${formatBytes(event.bytes)}`,
            ),
          ),
        ),
  );
}
