import { describe, expect, it } from "vitest";
import { emptyReferenceArray } from "../src/reference-array.js";

describe("emptyReferenceArray", () => {
  it("returns a new, empty, ordinary array each time", () => {
    const first = emptyReferenceArray<{ id: number }>();
    const second = emptyReferenceArray<{ id: number }>();
    expect(Array.isArray(first)).toBe(true);
    expect(first).toEqual([]);
    expect(first).not.toBe(second);
    first.push({ id: 1 }, { id: 2 });
    expect(first).toEqual([{ id: 1 }, { id: 2 }]);
    expect(second).toEqual([]);
    expect(first.shift()).toEqual({ id: 1 });
    expect(first).toHaveLength(1);
  });
});
