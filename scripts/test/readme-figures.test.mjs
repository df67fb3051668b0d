import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { replaceBlock, surfaceTable } from "../readme-figures.mjs";

const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const bench = {
  node: "v20.20.2",
  date: "2026-11-30T09:00:00.000Z",
  surface: [
    { catalog: "real MCP catalogs (97 tools, 8 servers)", direct_tokens: 13246, code_mode_tokens: 432 },
  ],
};

describe("README figures from the engine bench", () => {
  it("renders the bench's surface rows as a table with the saving", () => {
    expect(surfaceTable(bench)).toBe(
      [
        "| tools behind codecell | shown directly | through codecell (exec + wait) | saved |",
        "|---|---:|---:|---:|",
        "| real MCP catalogs (97 tools, 8 servers) | 13,246 | 432 | 96.7% |",
        "",
        "Measured 2026-11-30 on Node v20.20.2.",
      ].join("\n"),
    );
  });

  it("adds the outputSchema figure and the result-text size when the bench has them", () => {
    const withText = {
      ...bench,
      surface: [{ ...bench.surface[0], with_output_schema_tokens: 540 }],
      resultText: { return_1_text_chars: 32, return_1_full_json_chars: 384 },
    };
    const table = surfaceTable(withText);
    expect(table).toContain("the first row is 540 tokens.");
    expect(table).toContain("The text of a `return 1` result, which the model reads, is 32 characters;");
    expect(table).toContain("(384 characters)");
    expect(table.endsWith("Measured 2026-11-30 on Node v20.20.2.")).toBe(true);
  });

  it("replaces only the marked block, and refuses a README without it", () => {
    const text = "a\n<!-- figures:x:start -->\nold\n<!-- figures:x:end -->\nb";
    expect(replaceBlock(text, "x", "new")).toBe(
      "a\n<!-- figures:x:start -->\nnew\n<!-- figures:x:end -->\nb",
    );
    expect(() => replaceBlock("no markers", "x", "new")).toThrow(/no <!-- figures:x:start -->/);
  });

  it("the root README holds a generated surface table, not hand-typed figures", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const block =
      /<!-- figures:engine-surface:start -->\n([\s\S]*?)\n<!-- figures:engine-surface:end -->/.exec(readme);
    expect(block?.[1]).toMatch(/^\| tools behind codecell \|[\s\S]*\nMeasured \d{4}-\d\d-\d\d on Node v\d+/);
  });
});
