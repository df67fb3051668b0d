import type { TrajectoryEntry } from "@codecell/contract";
import { element, formatDuration } from "./dom.js";
import { renderJsonTree } from "./json-tree.js";

export type TrajectoryNode = TrajectoryEntry & { nested: TrajectoryEntry[] };
export type TrajectoryTree = {
  /** exec and wait calls, newest first, each with its nested calls in the order they started. */
  calls: TrajectoryNode[];
  /** Nested calls whose exec/wait entry is no longer in the (bounded) record. */
  orphans: TrajectoryEntry[];
};

function byStart(a: TrajectoryEntry, b: TrajectoryEntry): number {
  return Date.parse(a.startedAt) - Date.parse(b.startedAt);
}

/** Groups nested calls under the exec or wait call that made them. */
export function buildTrajectoryTree(entries: readonly TrajectoryEntry[]): TrajectoryTree {
  const calls = new Map<string, TrajectoryNode>();
  for (const entry of entries) {
    if (entry.kind === "control") calls.set(entry.toolCallId, { ...entry, nested: [] });
  }
  const orphans: TrajectoryEntry[] = [];
  for (const entry of entries) {
    if (entry.kind !== "nested") continue;
    const parent = entry.parentToolCallId ? calls.get(entry.parentToolCallId) : undefined;
    if (parent) parent.nested.push(entry);
    else orphans.push(entry);
  }
  const sorted = [...calls.values()].sort((a, b) => byStart(b, a));
  for (const call of sorted) call.nested.sort(byStart);
  return { calls: sorted, orphans: orphans.sort(byStart) };
}

function statusTag(status: TrajectoryEntry["status"], code?: string): HTMLElement {
  return element(
    "span",
    { className: `badge badge-small badge-${status}` },
    code ? `${status} · ${code}` : status,
  );
}

function nestedRow(entry: TrajectoryEntry): HTMLElement {
  const input =
    entry.input === undefined
      ? null
      : element(
          "details",
          { className: "trajectory-input" },
          element("summary", {}, "input"),
          renderJsonTree(entry.input, { openDepth: 0 }),
        );
  return element(
    "li",
    { className: "trajectory-nested", "data-testid": "trajectory-nested" },
    element(
      "div",
      { className: "trajectory-row" },
      element("code", { className: "trajectory-tool" }, entry.tool),
      entry.via ? element("span", { className: "muted trajectory-via" }, `via ${entry.via}`) : null,
      statusTag(entry.status, entry.code),
      element("span", { className: "muted trajectory-time" }, formatDuration(entry.durationMs)),
    ),
    input,
    entry.error ? element("p", { className: "trajectory-error" }, entry.error) : null,
  );
}

function callNode(call: TrajectoryNode, open: boolean): HTMLElement {
  const language =
    call.input && typeof call.input === "object" && !Array.isArray(call.input)
      ? call.input.language
      : undefined;
  const summary = element(
    "summary",
    { className: "trajectory-row" },
    element("strong", { className: "trajectory-tool" }, call.tool),
    typeof language === "string" ? element("span", { className: "muted" }, language) : null,
    statusTag(call.status, call.code),
    element(
      "span",
      { className: "muted" },
      call.nested.length === 1 ? "1 nested call" : `${call.nested.length} nested calls`,
    ),
    element("span", { className: "muted trajectory-time" }, formatDuration(call.durationMs)),
  );
  return element(
    "details",
    { className: "trajectory-call", open, "data-testid": "trajectory-call" },
    summary,
    call.codeModeRunId
      ? element("p", { className: "muted trajectory-run" }, "runId ", element("code", {}, call.codeModeRunId))
      : null,
    call.error ? element("p", { className: "trajectory-error" }, call.error) : null,
    call.nested.length > 0
      ? element("ol", { className: "trajectory-children" }, ...call.nested.map(nestedRow))
      : null,
  );
}

/** Calls rendered at most; a long session keeps the panel fast and the rest are one line. */
export const MAX_RENDERED_CALLS = 50;

/** The trajectory as a tree; the newest call starts open. */
export function renderTrajectory(tree: TrajectoryTree): HTMLElement {
  if (tree.calls.length === 0 && tree.orphans.length === 0) {
    return element(
      "p",
      { className: "muted empty" },
      "No exec or wait call yet in this session. Run a cell.",
    );
  }
  return element(
    "div",
    { className: "trajectory" },
    ...tree.calls.slice(0, MAX_RENDERED_CALLS).map((call, index) => callNode(call, index === 0)),
    tree.calls.length > MAX_RENDERED_CALLS
      ? element(
          "p",
          { className: "muted" },
          `${tree.calls.length - MAX_RENDERED_CALLS} older exec/wait calls not shown.`,
        )
      : null,
    tree.orphans.length > 0
      ? element(
          "section",
          { className: "trajectory-orphans" },
          element("h3", {}, "Nested calls of older, trimmed exec/wait calls"),
          element("ol", { className: "trajectory-children" }, ...tree.orphans.map(nestedRow)),
        )
      : null,
  );
}
