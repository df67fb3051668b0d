// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { renderJsonTree } from "../src/json-tree.js";

describe("renderJsonTree", () => {
  it("renders scalars inline with a class per JSON type", () => {
    const cases: Array<[unknown, string, string]> = [
      ["hi", "json-string", '"hi"'],
      [42, "json-number", "42"],
      [true, "json-boolean", "true"],
      [null, "json-null", "null"],
      [undefined, "json-undefined", "undefined"],
    ];
    for (const [value, className, text] of cases) {
      const tree = renderJsonTree(value);
      expect(tree.querySelector(`.${className}`)?.textContent).toBe(text);
    }
  });

  it("nests objects and arrays as details, open to the given depth", () => {
    const tree = renderJsonTree({ a: { b: { c: [1, 2] } }, empty: [] }, { openDepth: 1 });
    const nodes = [...tree.querySelectorAll("details")];
    expect(nodes.map((node) => node.querySelector(":scope > summary")?.textContent)).toEqual([
      "{2 keys}",
      "a: {1 key}",
      "b: {1 key}",
      "c: [2 items]",
    ]);
    expect(nodes.map((node) => node.open)).toEqual([true, true, false, false]);
    expect(tree.querySelector(".json-empty")?.textContent).toBe("[]");
    expect(tree.textContent).toContain("c: [2 items]0: 11: 2");
  });

  it("caps very long arrays and says how many were left out", () => {
    const tree = renderJsonTree(Array.from({ length: 620 }, (_, index) => index));
    expect(tree.querySelectorAll(".json-children > .json-row")).toHaveLength(500);
    expect(tree.querySelector(".json-more")?.textContent).toBe("… 120 more not shown");
  });
});
