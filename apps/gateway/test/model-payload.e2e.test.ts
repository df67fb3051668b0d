import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertModelText, CLI } from "./harness.js";

// Over real stdio with the SDK client against the embedded default config (what
// `codecell serve` runs without --config): the model-facing payload stays small.
describe("the model-facing payload of the embedded default", () => {
  let client: Client;

  beforeAll(async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "serve"],
      // The test run's CODECELL_DATA_DIR (a temporary folder) must reach the gateway.
      env: process.env as Record<string, string>,
      stderr: "pipe",
    });
    client = new Client({ name: "codecell-payload-test", version: "1.0.0" });
    await client.connect(transport);
  });
  afterAll(() => client?.close());

  const call = async (name: "exec" | "wait", args: Record<string, unknown>) => {
    // The SDK client checks structuredContent against the tool's outputSchema on every call.
    const result = await client.callTool({ name, arguments: args });
    const text = (result.content as Array<{ type: string; text: string }>)[0]!.text;
    const structured = result.structuredContent as Record<string, unknown>;
    assertModelText(JSON.parse(text) as Record<string, unknown>, structured);
    return { text, structured, isError: result.isError === true };
  };

  it("lists exec and wait in under 8,000 characters, sharing one small outputSchema", async () => {
    const listed = await client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    expect(JSON.stringify(listed).length).toBeLessThan(8_000);
    const [exec, wait] = listed.tools;
    expect(exec!.outputSchema).toEqual(wait!.outputSchema);
    expect(JSON.stringify(exec!.outputSchema).length).toBeLessThan(600);
  });

  it("defines exec and wait for the model in at most 500 o200k tokens", async () => {
    const { tools } = await client.listTools();
    // What a client hands a model provider for each tool: name, description and input schema.
    const definitions = tools.map(({ name, description, inputSchema }) => ({
      name,
      description,
      inputSchema,
    }));
    expect(encode(JSON.stringify(definitions)).length).toBeLessThanOrEqual(500);
  });

  it("answers `return 1` with a text under 160 characters; telemetry stays in structuredContent", async () => {
    const { text, structured } = await call("exec", { code: "return 1" });
    expect(text).toBe('{"status":"completed","value":1}');
    expect(text.length).toBeLessThan(160);
    expect(structured).toMatchObject({
      status: "completed",
      value: 1,
      telemetry: { execCount: 1, visibleToolNames: ["exec", "wait"] },
    });
  });

  it("keeps output, error and code in the text of a failed result", async () => {
    const { text, isError } = await call("exec", {
      code: `console.log("about to read"); await tools.read_file({ path: "no-such-file.md" });`,
    });
    expect(isError).toBe(true);
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(parsed).sort()).toEqual(["code", "error", "output", "status"]);
    expect(parsed).toMatchObject({
      status: "failed",
      code: "nested_tool_failed",
      output: [{ type: "text", text: "about to read", level: "log" }],
    });
  });

  it("keeps runId, reason and the yield reason in the text of a waiting result, and wait goes on", async () => {
    const first = await call("exec", { code: `await yield_control("check with the user"); return 2;` });
    const parsed = JSON.parse(first.text) as Record<string, unknown>;
    expect(parsed).toEqual({
      status: "waiting",
      runId: expect.any(String),
      reason: "yield",
      yieldReason: "check with the user",
    });
    const done = await call("wait", { runId: parsed.runId });
    expect(done.text).toBe('{"status":"completed","value":2}');
  });
});
