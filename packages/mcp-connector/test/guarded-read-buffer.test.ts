import { CodeModeError } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scanJsonLine } from "../src/guarded-read-buffer.js";
import { createMcpConnector, type McpConnector } from "../src/index.js";
import { controlServerPath } from "./support/servers.js";

let connector: McpConnector;

beforeAll(async () => {
  connector = createMcpConnector(
    { control: { command: process.execPath, args: [controlServerPath] } },
    // Longer than the test's own timeout: a dropped answer would show as a test timeout, not a pass.
    { callTimeoutMs: 120_000 },
  );
  await connector.start();
  expect(connector.diagnostics).toEqual([]);
});
afterAll(() => connector?.close());

async function failure(promise: Promise<unknown>): Promise<CodeModeError> {
  try {
    await promise;
  } catch (error) {
    expect(CodeModeError.is(error), String(error)).toBe(true);
    return error as CodeModeError;
  }
  throw new Error("expected the call to fail");
}

describe("answers a downstream server cannot send through", () => {
  it("reports a result nested 5,000 deep at once as nested_tool_failed naming the limit", async () => {
    const error = await failure(connector.callTool("control", "deep_result", { depth: 5000 }));
    expect(error.code).toBe("nested_tool_failed");
    expect(error.message).toMatch(
      /nested more than 1000 levels deep \(the gateway's limit for MCP results\)/,
    );
    // A result within the limit still arrives, on the same connection.
    const fine = (await connector.callTool("control", "deep_result", { depth: 50 })) as {
      structuredContent: unknown;
    };
    expect(JSON.stringify(fine.structuredContent)).toMatch(/^(\{"o":){50}\{"leaf":true\}/);
  }, 20_000);

  it("reports an answer over 10 MiB at once and keeps the connection", async () => {
    const pidBefore = connector.status()[0]?.pid;
    const error = await failure(connector.callTool("control", "big_result", { bytes: 11 * 1024 * 1024 }));
    expect(error.code).toBe("nested_tool_failed");
    expect(error.message).toMatch(/larger than 10485760 bytes \(the gateway's limit for one MCP message\)/);
    const echoed = (await connector.callTool("control", "echo_arguments", { text: "still here" })) as {
      content: Array<{ text: string }>;
    };
    expect(echoed.content[0]?.text).toContain("still here");
    expect(connector.status()[0]?.pid).toBe(pidBefore);
  }, 20_000);
});

describe("scanJsonLine", () => {
  it("finds depth, the top-level id and whether it is a response, skipping strings", () => {
    expect(scanJsonLine('{"jsonrpc":"2.0","id":7,"result":{"a":["[[[[{"]}}')).toEqual({
      depth: 3,
      id: 7,
      isResponse: true,
    });
    expect(scanJsonLine('{"method":"x","params":{"id":3,"s":"\\"{"}}')).toEqual({
      depth: 2,
      id: null,
      isResponse: false,
    });
    expect(scanJsonLine('{"id":"abc","error":{}}').id).toBe("abc");
  });
});
