import { describe, expect, it } from "vitest";
import { codeModeResultJsonSchema, codeModeResultSchema, emptyTelemetry } from "./results.js";

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
