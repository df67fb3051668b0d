import { emptyTelemetry } from "@codecell/contract";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { codeModeResultOf, GatewayCallError } from "../src/gateway-session.js";

const completed = { status: "completed", value: 42, telemetry: emptyTelemetry() };

describe("codeModeResultOf", () => {
  it.each<[string, CallToolResult, unknown]>([
    [
      "structured content",
      { content: [{ type: "text", text: "ignored" }], structuredContent: completed },
      completed,
    ],
    [
      "the JSON text item of an older server",
      { content: [{ type: "text", text: JSON.stringify(completed) }] },
      completed,
    ],
    [
      "a failed result marked isError",
      {
        content: [{ type: "text", text: "{}" }],
        structuredContent: { status: "failed", error: "x", code: "timeout", telemetry: emptyTelemetry() },
        isError: true,
      },
      { status: "failed", error: "x", code: "timeout", telemetry: emptyTelemetry() },
    ],
  ])("reads %s", (_name, result, expected) => {
    expect(codeModeResultOf(result)).toEqual(expected);
  });

  it.each<[string, CallToolResult, RegExp]>([
    [
      "a tool error (code mode off: exec is unknown)",
      { content: [{ type: "text", text: 'invalid_input: Unknown tool "exec".' }], isError: true },
      /without a code-mode result \(invalid_input: Unknown tool "exec"\.\)\. Is code mode enabled/,
    ],
    [
      "JSON that is not a result",
      { content: [{ type: "text", text: '{"hello":1}' }] },
      /without a code-mode result/,
    ],
    ["no content at all", { content: [] }, /without a code-mode result\. Is code mode/],
  ])("refuses %s with a GatewayCallError that says why", (_name, result, message) => {
    expect(() => codeModeResultOf(result)).toThrow(GatewayCallError);
    expect(() => codeModeResultOf(result)).toThrow(message);
  });
});
