import { describe, expect, it } from "vitest";
import { connectStdio, makeSetup } from "./harness.js";

const everything = { package: "@modelcontextprotocol/server-everything", args: ["stdio"] };

// A screenshot-like MCP tool's image, shown by a cell with image(...), reaches the MCP client as image
// content of the exec result; the text names it by type and size.
describe("image() through the MCP front", () => {
  const cell = `const shot = await MCP.everything.get_tiny_image({}); image(shot); return "shown";`;

  it("delivers a nested tool's image as MCP image content when images are on", async () => {
    const setup = makeSetup({
      tools: { codeMode: { enabled: true, images: true, maxOutputBytes: 1_048_576 } },
      mcpServers: { everything },
    });
    const gateway = await connectStdio(setup.configPath);
    try {
      const listed = await gateway.client.listTools();
      expect(listed.tools.find((tool) => tool.name === "exec")?.description).toContain("image(source)");
      const result = await gateway.client.callTool({ name: "exec", arguments: { code: cell } });
      const content = result.content as Array<{
        type: string;
        text?: string;
        data?: string;
        mimeType?: string;
      }>;
      expect(result.isError ?? false, content[0]?.text).toBe(false);
      const images = content.filter((item) => item.type === "image");
      expect(images).toHaveLength(1);
      expect(images[0]!.mimeType).toBe("image/png");
      expect(Buffer.from(images[0]!.data!, "base64").subarray(1, 4).toString("latin1")).toBe("PNG");
      const text = JSON.parse(content[0]!.text!) as { value: string; output: unknown[] };
      expect(text.value).toBe("shown");
      expect(text.output).toEqual([{ type: "image", mimeType: "image/png", bytes: images[0]!.data!.length }]);
    } finally {
      await gateway.close();
    }
  });

  it("refuses image() with a clear error when images are off", async () => {
    const setup = makeSetup({ tools: { codeMode: true }, mcpServers: { everything } });
    const gateway = await connectStdio(setup.configPath);
    try {
      const listed = await gateway.client.listTools();
      expect(listed.tools.find((tool) => tool.name === "exec")?.description).not.toContain("image(");
      const result = await gateway.client.callTool({ name: "exec", arguments: { code: cell } });
      const content = result.content as Array<{ type: string; text?: string }>;
      expect(result.isError).toBe(true);
      expect(content.some((item) => item.type === "image")).toBe(false);
      expect(JSON.parse(content[0]!.text!)).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(content[0]!.text).toContain("tools.codeMode.images: true");
    } finally {
      await gateway.close();
    }
  });
});
