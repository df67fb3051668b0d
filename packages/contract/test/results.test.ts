import { describe, expect, it } from "vitest";
import {
  type CodeModeResult,
  codeModeModelResult,
  codeModeResultOutputSchema,
  codeModeResultText,
  emptyTelemetry,
} from "../src/results.js";
import { codeModeResultJsonSchema, codeModeResultSchema } from "../src/schemas.js";

describe("result union", () => {
  const telemetry = emptyTelemetry();
  it.each([
    { status: "completed", value: { a: 1 }, output: [{ type: "text", text: "hi" }], telemetry },
    { status: "waiting", runId: "r", reason: "yield", telemetry },
    {
      status: "waiting",
      runId: "r",
      reason: "pending_tools",
      pendingToolCalls: [{ callId: "1", toolId: "core:host:slow", startedAt: "2026-01-01T00:00:00.000Z" }],
      telemetry,
    },
    { status: "failed", error: "boom", code: "timeout", output: [{ type: "json", value: [1] }], telemetry },
  ])("accepts a $status result", (result) => {
    expect(codeModeResultSchema.parse(result)).toEqual(result);
  });

  it.each([
    ["an unknown status", { status: "done", telemetry }],
    ["an unknown error code", { status: "failed", error: "x", code: "oops", telemetry }],
    ["a waiting result without runId", { status: "waiting", reason: "yield", telemetry }],
    ["an unknown output type", { status: "completed", value: 1, output: [{ type: "image" }], telemetry }],
    ["missing telemetry", { status: "completed", value: 1 }],
  ])("refuses %s", (_name, result) => {
    expect(codeModeResultSchema.safeParse(result).success).toBe(false);
  });

  it("has a JSON Schema for MCP outputSchema", () => {
    expect(JSON.stringify(codeModeResultJsonSchema)).toContain("pending_tools");
  });
});

describe("the model's view of a result", () => {
  // The promise tested here: the text holds status, value or error and code, output, runId, reason and pending
  // calls, and nothing else; telemetry stays in the full result.
  const telemetry = { ...emptyTelemetry(), durationMs: 1433, visibleToolNames: ["exec", "wait"] };

  it("keeps the value and output of a completed result and drops telemetry", () => {
    const result: CodeModeResult = { status: "completed", value: 1, telemetry };
    expect(codeModeResultText(result)).toBe('{"status":"completed","value":1}');
    expect(codeModeResultText(result).length).toBeLessThan(160);
    const withOutput: CodeModeResult = {
      status: "completed",
      value: { a: [1] },
      output: [{ type: "text", text: "hi", level: "log" }],
      telemetry,
    };
    expect(codeModeModelResult(withOutput)).toEqual({
      status: "completed",
      value: { a: [1] },
      output: [{ type: "text", text: "hi", level: "log" }],
    });
  });

  it("keeps error and code of a failed result", () => {
    const result: CodeModeResult = {
      status: "failed",
      error: "Tool x failed: no",
      code: "nested_tool_failed",
      telemetry,
    };
    expect(codeModeModelResult(result)).toEqual({
      status: "failed",
      error: "Tool x failed: no",
      code: "nested_tool_failed",
    });
  });

  it("keeps runId, reason and the pending calls (without start times) of a waiting result", () => {
    const result: CodeModeResult = {
      status: "waiting",
      runId: "run_abc",
      reason: "yield",
      yieldReason: "ask the user",
      pendingToolCalls: [
        { callId: "r1", toolId: "core:host:slow_echo", startedAt: "2026-01-01T00:00:00.000Z" },
        { callId: "r2", toolId: "core:host:slow_echo", startedAt: "2026-01-01T00:00:00.000Z", queued: true },
      ],
      telemetry,
    };
    expect(codeModeModelResult(result)).toEqual({
      status: "waiting",
      runId: "run_abc",
      reason: "yield",
      yieldReason: "ask the user",
      pendingToolCalls: [
        { callId: "r1", toolId: "core:host:slow_echo" },
        { callId: "r2", toolId: "core:host:slow_echo", queued: true },
      ],
    });
  });

  it("declares one small output schema that names every field of the full result", () => {
    expect(JSON.stringify(codeModeResultOutputSchema).length).toBeLessThan(600);
    const fields = new Set<string>();
    for (const branch of codeModeResultSchema.options)
      for (const key of Object.keys(branch.shape)) fields.add(key);
    expect(Object.keys(codeModeResultOutputSchema.properties).sort()).toEqual([...fields].sort());
  });
});
