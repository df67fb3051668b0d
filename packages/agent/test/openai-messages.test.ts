import { describe, expect, it } from "vitest";
import { toOpenAiMessages } from "../src/openai-messages.js";

const PNG = "iVBORw0KGgo=";
const GIF = "R0lGODlh";

describe("toOpenAiMessages", () => {
  it("sends a run of tool results unbroken, then their images in one user message", () => {
    const wire = toOpenAiMessages([
      { role: "user", content: "look" },
      {
        role: "assistant",
        content: null,
        toolCalls: [
          { id: "call_a", name: "exec", arguments: "{}" },
          { id: "call_b", name: "exec", arguments: "{}" },
          { id: "call_c", name: "exec", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "call_a", content: "a", images: [{ mimeType: "image/png", data: PNG }] },
      { role: "tool", toolCallId: "call_b", content: "b" },
      { role: "tool", toolCallId: "call_c", content: "c", images: [{ mimeType: "image/gif", data: GIF }] },
      { role: "user", content: "well?" },
    ]);
    expect(wire.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "tool",
      "tool",
      "user",
      "user",
    ]);
    expect(wire[2]).toEqual({ role: "tool", tool_call_id: "call_a", content: "a" });
    expect(wire[5]).toEqual({
      role: "user",
      content: [
        { type: "text", text: expect.stringContaining("call_a") },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
        { type: "text", text: expect.stringContaining("call_c") },
        { type: "image_url", image_url: { url: `data:image/gif;base64,${GIF}` } },
      ],
    });
    expect(wire[6]).toEqual({ role: "user", content: "well?" });
  });

  it("adds nothing when no tool result holds images", () => {
    const wire = toOpenAiMessages([
      { role: "assistant", content: null, toolCalls: [{ id: "call_a", name: "exec", arguments: "{}" }] },
      { role: "tool", toolCallId: "call_a", content: "a" },
    ]);
    expect(wire.map((message) => message.role)).toEqual(["assistant", "tool"]);
  });
});
