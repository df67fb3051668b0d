import type { CodeModeResult } from "@codecell/contract";
import { emptyTelemetry } from "@codecell/contract";
import { prepareCell } from "@codecell/transpile";
import { describe, expect, it } from "vitest";
import { BrowseCellError, browseCells, CatalogService, SEARCH_LIMIT } from "../src/catalog-service.js";

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
  ...args: string[]
) => (...values: unknown[]) => Promise<unknown>;

/** Runs a browse cell as a cell body with recording stand-ins for the guest globals it names. */
async function argumentsOf(code: string): Promise<unknown[]> {
  const seen: unknown[] = [];
  const record = async (...args: unknown[]) => {
    seen.push(...args);
    return [];
  };
  const tools = { search: record, describe: record };
  const api = { list: record, read: record };
  await new AsyncFunction("tools", "API", "ALL_TOOLS", code)(tools, api, []);
  return seen;
}

describe("browseCells", () => {
  const awkward = [
    "plain words",
    "with \"double\" and 'single' quotes",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the query must survive a literal ${...}
    "back`ticks` and ${template}",
    "new\nline and \u2028 separator",
    "\\ backslash",
    "</script>",
  ];
  it.each(awkward)("passes %j to tools.search unchanged, as valid cell code", async (query) => {
    const code = browseCells.search(query);
    await expect(prepareCell(code, "javascript")).resolves.toEqual({ code, inserted: null });
    expect(await argumentsOf(code)).toEqual([query, { limit: SEARCH_LIMIT }]);
  });

  it("passes ids and paths unchanged to describe, API.list and API.read", async () => {
    expect(await argumentsOf(browseCells.describe('a:"b":c'))).toEqual(['a:"b":c']);
    expect(await argumentsOf(browseCells.apiList())).toEqual(["mcp"]);
    expect(await argumentsOf(browseCells.apiRead("mcp/x`y.d.ts"))).toEqual(["mcp/x`y.d.ts"]);
    expect(browseCells.allTools()).toBe("return ALL_TOOLS;");
  });
});

describe("CatalogService", () => {
  const runner = (result: CodeModeResult) => ({ exec: async () => result });
  const telemetry = emptyTelemetry();

  it("returns a completed cell's value", async () => {
    const service = new CatalogService(runner({ status: "completed", value: [{ id: "x" }], telemetry }));
    await expect(service.allTools()).resolves.toEqual([{ id: "x" }]);
  });

  it("turns a failed or waiting browse cell into an error with the gateway's message and code", async () => {
    const failed = new CatalogService(
      runner({ status: "failed", code: "invalid_input", error: "Unknown tool id", telemetry }),
    );
    await expect(failed.describe("nope")).rejects.toMatchObject({
      name: "BrowseCellError",
      code: "invalid_input",
      message: "Unknown tool id",
    });
    const waiting = new CatalogService(runner({ status: "waiting", runId: "r", reason: "yield", telemetry }));
    await expect(waiting.apiFiles()).rejects.toBeInstanceOf(BrowseCellError);
  });
});
