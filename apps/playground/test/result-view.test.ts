// @vitest-environment happy-dom
import { type CodeModeResult, emptyTelemetry } from "@codecell/contract";
import { describe, expect, it, vi } from "vitest";
import { renderResult, statusLabel } from "../src/result-view.js";

const telemetry = { ...emptyTelemetry(), durationMs: 12 };

const completed: CodeModeResult = {
  status: "completed",
  value: { total: 2550, regions: ["north"] },
  output: [
    { type: "text", text: "first" },
    { type: "json", value: { n: 1 } },
    { type: "text", text: "third" },
  ],
  telemetry,
};
const waiting: CodeModeResult = {
  status: "waiting",
  runId: "run-abc",
  reason: "pending_tools",
  pendingToolCalls: [{ callId: "7", toolId: "core:codecell:exec", startedAt: new Date(0).toISOString() }],
  output: [{ type: "text", text: "before" }],
  telemetry,
};
const failed: CodeModeResult = {
  status: "failed",
  code: "module_access_denied",
  error: "Module access is not available in a cell: a dynamic import() at line 4:18.",
  telemetry,
};

describe("statusLabel", () => {
  it.each([
    [completed, "completed"],
    [waiting, "waiting · pending_tools"],
    [{ ...waiting, reason: "yield" } as CodeModeResult, "waiting · yield"],
    [failed, "failed · module_access_denied"],
    [{ status: "failed", error: "TypeError: x", telemetry } as CodeModeResult, "failed"],
  ])("%#: %s", (result, label) => {
    expect(statusLabel(result)).toBe(label);
  });
});

describe("renderResult", () => {
  it("shows a completed value and the output items in order, text as text and JSON as a tree", () => {
    const view = renderResult(completed, { via: "exec", roundTripMs: 30.4 });
    expect(view.querySelector('[data-testid="status"]')?.textContent).toBe("completed");
    expect(view.querySelector(".result-header")?.textContent).toContain("exec · 12 ms · round trip 30 ms");
    expect(view.querySelector('[data-testid="value"]')?.textContent).toContain("total: 2550");
    const items = [...view.querySelectorAll(".output-item")];
    expect(items.map((item) => item.className)).toEqual([
      "output-item output-text",
      "output-item output-json",
      "output-item output-text",
    ]);
    expect(items[0]!.querySelector("pre")?.textContent).toBe("first");
    expect(items[1]!.querySelector("details")).not.toBeNull();
    expect(view.querySelector('[data-testid="error"]')).toBeNull();
  });

  it("shows a waiting result's reason, runId and pending calls, without a value", () => {
    const view = renderResult(waiting, { via: "exec" });
    expect(view.querySelector('[data-testid="waiting-reason"]')?.textContent).toContain(
      "nested tool calls are still running",
    );
    expect(view.querySelector('[data-testid="run-id"]')?.textContent).toBe("run-abc");
    const rows = [...view.querySelectorAll('[data-testid="pending"] tbody tr')];
    expect(rows.map((row) => row.textContent)).toEqual([expect.stringContaining("core:codecell:exec")]);
    expect(view.querySelector('[data-testid="value"]')).toBeNull();
  });

  it("shows a failure's code and message and links the line it points to", () => {
    const onShowLine = vi.fn();
    const view = renderResult(failed, { via: "exec", onShowLine });
    expect(view.querySelector(".error-code")?.textContent).toBe("module_access_denied");
    expect(view.querySelector(".error-message")?.textContent).toContain("dynamic import()");
    const link = view.querySelector<HTMLButtonElement>('[data-testid="error-line"]')!;
    expect(link.textContent).toBe("line 4, column 18");
    link.click();
    expect(onShowLine).toHaveBeenCalledWith({ line: 4, column: 18 });
  });

  it("says so when a failure names no line, and when there is no output", () => {
    const view = renderResult(
      { status: "failed", code: "timeout", error: "Too slow.", telemetry },
      { via: "wait" },
    );
    expect(view.querySelector('[data-testid="error-line"]')).toBeNull();
    expect(view.querySelector('[data-testid="output"]')?.textContent).toContain(
      "No text() or json() output.",
    );
    expect(view.querySelector(".result-header")?.textContent).toContain("wait");
  });

  it("lists the type check's findings, each linking its line, with the properties a tool accepts", () => {
    const onShowLine = vi.fn();
    const view = renderResult(
      {
        ...completed,
        diagnostics: [
          {
            file: "cell.ts",
            line: 3,
            column: 57,
            code: "TS2561",
            message: "Object literal may only specify known properties, but 'observation' does not exist.",
            accepts: ["name", "entityType", "observations"],
          },
          { file: "cell.ts", line: 5, column: 1, code: "TS2304", message: "Cannot find name 'fetch'." },
        ],
      },
      { via: "exec", onShowLine },
    );
    const items = [...view.querySelectorAll('[data-testid="diagnostic"]')];
    expect(view.querySelector('[data-testid="diagnostics"] h3')?.textContent).toBe("Type check (2)");
    expect(items.map((item) => item.querySelector(".error-code")?.textContent)).toEqual(["TS2561", "TS2304"]);
    expect(items[0]!.querySelector(".diagnostic-accepts")?.textContent).toBe(
      "Accepts: name, entityType, observations",
    );
    expect(items[1]!.querySelector(".diagnostic-accepts")).toBeNull();
    items[0]!.querySelector("button")!.click();
    expect(onShowLine).toHaveBeenCalledWith({ line: 3, column: 57 });
    expect(renderResult(completed, { via: "exec" }).querySelector('[data-testid="diagnostics"]')).toBeNull();
  });

  it("shows the note of a cell whose type check did not finish", () => {
    const note =
      "The type check did not finish (the type check took longer than 15000 ms); the cell ran unchecked.";
    const view = renderResult({ ...completed, typecheckNote: note }, { via: "exec" });
    expect(view.querySelector('[data-testid="typecheck-note"]')?.textContent).toContain(note);
    expect(
      renderResult(completed, { via: "exec" }).querySelector('[data-testid="typecheck-note"]'),
    ).toBeNull();
  });
});
