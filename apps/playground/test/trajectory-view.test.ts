// @vitest-environment happy-dom
import type { TrajectoryEntry } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { buildTrajectoryTree, MAX_RENDERED_CALLS, renderTrajectory } from "../src/trajectory-view.js";

const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();

const entries: TrajectoryEntry[] = [
  {
    kind: "control",
    toolCallId: "s/call-1",
    tool: "exec",
    input: { language: "javascript" },
    status: "waiting",
    codeModeRunId: "run-1",
    startedAt: at(1),
    durationMs: 20,
  },
  {
    kind: "nested",
    toolCallId: "s/call-1/2",
    parentToolCallId: "s/call-1",
    tool: "plugin:notes:notes_list",
    via: "namespace",
    status: "completed",
    startedAt: at(3),
    durationMs: 2,
  },
  {
    kind: "nested",
    toolCallId: "s/call-1/1",
    parentToolCallId: "s/call-1",
    tool: "core:codecell:read_file",
    via: "tools.call",
    input: { path: "todo.md" },
    status: "completed",
    startedAt: at(2),
    durationMs: 1,
  },
  {
    kind: "control",
    toolCallId: "s/call-2",
    tool: "wait",
    status: "completed",
    codeModeRunId: "run-1",
    startedAt: at(5),
    durationMs: 4,
  },
  {
    kind: "nested",
    toolCallId: "s/call-0/1",
    parentToolCallId: "s/call-0",
    tool: "mcp:memory:read_graph",
    status: "failed",
    code: "tool_failed",
    error: "boom",
    startedAt: at(0),
  },
  {
    kind: "control",
    toolCallId: "s/call-3",
    tool: "exec",
    status: "failed",
    code: "timeout",
    error: "too slow",
    startedAt: at(6),
    durationMs: 1500,
  },
];

describe("buildTrajectoryTree", () => {
  it("puts nested calls under their exec/wait call, newest call first, nested in start order", () => {
    const tree = buildTrajectoryTree(entries);
    expect(tree.calls.map((call) => [call.toolCallId, call.nested.map((entry) => entry.tool)])).toEqual([
      ["s/call-3", []],
      ["s/call-2", []],
      ["s/call-1", ["core:codecell:read_file", "plugin:notes:notes_list"]],
    ]);
    expect(tree.orphans.map((entry) => entry.tool)).toEqual(["mcp:memory:read_graph"]);
  });

  it("is empty for an empty record", () => {
    expect(buildTrajectoryTree([])).toEqual({ calls: [], orphans: [] });
  });
});

describe("renderTrajectory", () => {
  it("renders calls with tool, status, timing and nested rows, the newest open", () => {
    const view = renderTrajectory(buildTrajectoryTree(entries));
    const calls = [...view.querySelectorAll<HTMLDetailsElement>('[data-testid="trajectory-call"]')];
    expect(calls.map((call) => call.open)).toEqual([true, false, false]);
    expect(calls[0]!.textContent).toContain("failed · timeout");
    expect(calls[0]!.textContent).toContain("1.50 s");
    expect(calls[0]!.textContent).toContain("too slow");
    const first = calls[2]!;
    expect(first.querySelector("summary")?.textContent).toContain("execjavascriptwaiting2 nested calls20 ms");
    expect(first.textContent).toContain("runId run-1");
    const nested = [...first.querySelectorAll('[data-testid="trajectory-nested"]')];
    expect(nested.map((row) => row.querySelector(".trajectory-tool")?.textContent)).toEqual([
      "core:codecell:read_file",
      "plugin:notes:notes_list",
    ]);
    expect(nested[0]!.textContent).toContain("via tools.call");
    expect(nested[0]!.querySelector(".trajectory-input")?.textContent).toContain('path: "todo.md"');
    expect(view.querySelector(".trajectory-orphans")?.textContent).toContain("failed · tool_failed");
  });

  it("renders only the newest calls of a long session and says how many it left out", () => {
    const many: TrajectoryEntry[] = Array.from({ length: MAX_RENDERED_CALLS + 7 }, (_, index) => ({
      kind: "control",
      toolCallId: `s/call-${index}`,
      tool: "exec",
      status: "completed",
      startedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index)).toISOString(),
    }));
    const view = renderTrajectory(buildTrajectoryTree(many));
    const calls = view.querySelectorAll('[data-testid="trajectory-call"]');
    expect(calls).toHaveLength(MAX_RENDERED_CALLS);
    expect(view.textContent).toContain("7 older exec/wait calls not shown.");
  });

  it("says when there is nothing yet", () => {
    expect(renderTrajectory({ calls: [], orphans: [] }).textContent).toMatch(/No exec or wait call yet/);
  });
});
