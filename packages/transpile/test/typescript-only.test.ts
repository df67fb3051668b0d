import { describe, expect, it } from "vitest";
import { isTypeScriptOnly } from "../src/index.js";

describe("isTypeScriptOnly", () => {
  it.each([
    ["a typed const", "const n: number = 1;\nreturn n;"],
    ["an interface and a cast", "interface A { x: number }\nconst a = {} as A;\nreturn a;"],
    ["a generic call", "const m = new Map<string, number>();\nreturn m.size;"],
    ["an import (refused later, as TypeScript)", 'import type { X } from "x";\nconst y: X = 1;'],
  ])("is true for %s", async (_, cell) => {
    expect(await isTypeScriptOnly(cell)).toBe(true);
  });

  it.each([
    ["JavaScript", "const n = 1;\nreturn n;"],
    ["a syntax error in either language", "const x = ;"],
    ["an unclosed brace", "if (true) {\nreturn 1;"],
  ])("is false for %s", async (_, cell) => {
    expect(await isTypeScriptOnly(cell)).toBe(false);
  });
});
