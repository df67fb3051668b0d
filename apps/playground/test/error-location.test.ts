import { describe, expect, it } from "vitest";
import { errorLocation } from "../src/error-location.js";

describe("errorLocation", () => {
  const cases: Array<[string, string | undefined, ReturnType<typeof errorLocation>]> = [
    [
      "a guest runtime error",
      "TypeError: cannot read property 'foo' of null (line 3, column 1)",
      { line: 3, column: 1 },
    ],
    [
      "module access refused",
      "Module access is not available in a cell: a dynamic import() at line 4:18. A cell…",
      { line: 4, column: 18 },
    ],
    ["a line without a column", "TypeScript could not be transformed at line 7", { line: 7 }],
    ["capitalised", "Line 12, column 5: unexpected token", { line: 12, column: 5 }],
    ["no location", "The cell ran past its deadline (timeoutMs) and was stopped.", null],
    ["a word that only starts like line", "pipeline 3 failed", null],
    ["line zero is not a line", "at line 0:1", null],
    ["empty", "", null],
    ["absent", undefined, null],
  ];
  it.each(cases)("%s", (_name, message, expected) => {
    expect(errorLocation(message)).toEqual(expected);
  });
});
