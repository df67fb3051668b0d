import { describe, expect, it } from "vitest";
import { locationAt, withoutLocationSuffix } from "../src/source-location.js";

describe("locationAt", () => {
  const table: Array<[name: string, source: string, offset: number, line: number, column: number]> = [
    ["start", "abc", 0, 1, 1],
    ["same line", "abc", 2, 1, 3],
    ["after \\n", "a\nbc", 3, 2, 2],
    ["\\r\\n counts once", "a\r\nb\r\nc", 6, 3, 1],
    ["lone \\r", "a\rb", 2, 2, 1],
    ["line separator U+2028", "a\u2028b", 2, 2, 1],
    ["paragraph separator U+2029", "a\u2029b", 2, 2, 1],
    ["offset past the end is clamped", "ab\n", 99, 2, 1],
    ["negative offset is clamped", "ab", -4, 1, 1],
  ];
  it.each(table)("%s", (_name, source, offset, line, column) => {
    expect(locationAt(source, offset)).toEqual({ line, column });
  });
});

describe("withoutLocationSuffix", () => {
  it.each([
    ["Unexpected token (1:10)", "Unexpected token"],
    ['Unexpected token, expected "," (12:4)', 'Unexpected token, expected ","'],
    ["No suffix here", "No suffix here"],
    ["Keeps (inner) parentheses (3:1)", "Keeps (inner) parentheses"],
  ])("%s", (message, expected) => {
    expect(withoutLocationSuffix(message)).toBe(expected);
  });
});
