import type { CodeModeResult } from "@codecell/contract";
import { createSandboxPool, type SandboxPool } from "@codecell/sandbox";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type CodeModeEngine, createCodeModeEngine } from "../src/index.js";
import { completedValue, context, hostTools, TestExecutor } from "./support.js";

// A 1x1 PNG, as a data URL and as the image content an MCP tool returns.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

// image(source): an opt-in output item (tools.codeMode.images), its type and size checked.
describe("image output", () => {
  let pool: SandboxPool;
  const engines: CodeModeEngine[] = [];
  beforeAll(() => {
    pool = createSandboxPool();
  });
  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.close();
  });
  afterAll(async () => {
    await pool.close();
  });

  function exec(config: Record<string, unknown>, code: string): Promise<CodeModeResult> {
    const engine = createCodeModeEngine({ config: { enabled: true, timeoutMs: 30_000, ...config }, pool });
    engines.push(engine);
    const run = engine.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
    return run.exec({ code }, { toolCallId: "cell" });
  }

  it("turns a data URL, an image content item and a tool result's images into output items", async () => {
    const result = await exec(
      { images: true },
      `image("data:image/png;base64,${PNG}");
       image({ type: "image", mimeType: "image/png", data: "${PNG}" });
       image({ content: [{ type: "text", text: "a screenshot" }, { type: "image", mimeType: "image/webp", data: "${PNG}" }] });
       return "shown";`,
    );
    expect(completedValue(result)).toBe("shown");
    expect(result.output).toEqual([
      { type: "image", mimeType: "image/png", data: PNG },
      { type: "image", mimeType: "image/png", data: PNG },
      { type: "image", mimeType: "image/webp", data: PNG },
    ]);
  });

  it("is refused with a clear error when images are off (the default)", async () => {
    const result = await exec({}, `image("data:image/png;base64,${PNG}"); return 1;`);
    expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(JSON.stringify(result)).toContain("tools.codeMode.images: true");
  });

  it("refuses a type off the allow list, bad base64, no image at all and an image past its cap", async () => {
    const result = await exec(
      { images: true, maxImageBytes: 2048 },
      `const errors = [];
       const tries = [
         () => image("data:image/svg+xml;base64,${PNG}"),
         () => image("data:image/png;base64,not base64!"),
         () => image({ hello: "world" }),
         () => image({ type: "image", mimeType: "image/png", data: "A".repeat(4096) }),
       ];
       for (const attempt of tries) { try { attempt(); errors.push("shown"); } catch (e) { errors.push((e.code ?? e.name) + ": " + e.message); } }
       return errors;`,
    );
    const errors = completedValue<string[]>(result);
    expect(errors[0]).toMatch(
      /^invalid_input: .*"image\/svg\+xml".*image\/png, image\/jpeg, image\/gif, image\/webp/,
    );
    expect(errors[1]).toMatch(/^invalid_input: .*base64/);
    expect(errors[2]).toMatch(/^TypeError: image\(source\): no image in the source/);
    expect(errors[3]).toMatch(/^output_limit_exceeded: .*4096 bytes.*maxImageBytes/);
    expect(result.output ?? []).toEqual([]);
  });

  it("counts images against maxOutputBytes", async () => {
    const result = await exec(
      { images: true, maxOutputBytes: 1024, maxImageBytes: 4096 },
      `image({ type: "image", mimeType: "image/png", data: "A".repeat(2048) }); return 1;`,
    );
    expect(result).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    expect(JSON.stringify(result)).toContain("maxOutputBytes");
  });
});
