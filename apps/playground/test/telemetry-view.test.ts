// @vitest-environment happy-dom
import { type CodeModeTelemetry, emptyTelemetry } from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { renderTelemetry, telemetryRows } from "../src/telemetry-view.js";

const telemetry: CodeModeTelemetry = {
  ...emptyTelemetry(),
  visibleToolNames: ["exec", "wait"],
  catalog: { size: 17, bySource: { core: 3, plugin: 5, mcp: 9, client: 0 } },
  execCount: 1,
  waitCount: 2,
  nested: { searches: 1, describes: 1, calls: 3, failedCalls: 1, toolIds: ["a:b:c", "a:b:c", "x:y:z"] },
  limitFailures: { timeout: 1, memory: 0, output: 0, snapshot: 0, pendingToolCalls: 0 },
  snapshotEvents: [
    { event: "stored", runId: "r1", bytes: 138_315 },
    { event: "resumed", runId: "r1" },
  ],
  durationMs: 18,
};

describe("telemetryRows", () => {
  it("lists every counter with the catalog breakdown and only the limits that failed", () => {
    expect(Object.fromEntries(telemetryRows(telemetry))).toEqual({
      duration: "18 ms",
      "tools the model sees": "exec, wait",
      "catalog size": "17 (core 3, plugin 5, mcp 9)",
      "exec calls": 1,
      "wait calls": 2,
      "nested searches": 1,
      "nested describes": 1,
      "nested calls": 3,
      "failed nested calls": 1,
      "limit failures": "timeout 1",
    });
    expect(Object.fromEntries(telemetryRows(emptyTelemetry()))["limit failures"]).toBe("none");
  });
});

describe("renderTelemetry", () => {
  it("shows the table, the nested tool ids in call order and the snapshot events", () => {
    const view = renderTelemetry(telemetry);
    expect(view.querySelectorAll('[data-testid="telemetry-table"] tr')).toHaveLength(10);
    const lists = [...view.querySelectorAll(".id-list")];
    expect([...lists[0]!.querySelectorAll("li")].map((item) => item.textContent)).toEqual([
      "a:b:c",
      "a:b:c",
      "x:y:z",
    ]);
    expect(lists[1]!.textContent).toContain("stored r1 · 135.1 KB");
  });

  it("asks for a run when there is no result yet", () => {
    expect(renderTelemetry(undefined).textContent).toBe("Run a cell to see its telemetry.");
  });
});
