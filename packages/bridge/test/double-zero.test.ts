import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DOUBLE_ZERO } from "../src/double-zero.js";

/**
 * Whether an object made before one of its number fields is given a double keeps the hidden class (map)
 * of one made after: V8's own answer (%HaveSameMap), in a child process with natives syntax enabled.
 */
function keepsMap(initial: string): boolean {
  const script = `
    class Timed { constructor(start) { this.at = start; this.other = null; } }
    const before = new Timed(${initial});
    const after = new Timed(${initial});
    after.at = performance.now() + 0.5;
    process.stdout.write(String(%HaveSameMap(before, after)));
  `;
  const output = execFileSync(process.execPath, ["--allow-natives-syntax", "-e", script], {
    encoding: "utf8",
  });
  return output === "true";
}

describe("DOUBLE_ZERO", () => {
  it("is zero wherever a time field is used", () => {
    expect(Object.is(DOUBLE_ZERO, 0)).toBe(true);
    expect(DOUBLE_ZERO < 1).toBe(true);
    expect(12.5 - DOUBLE_ZERO).toBe(12.5);
    expect(Math.max(0.001, 7 - DOUBLE_ZERO)).toBe(7);
    expect(DOUBLE_ZERO + 3).toBe(3);
  });

  it("starts a field as a double, so a later time does not replace the object's map", () => {
    // The control: a field that starts as the small integer 0 changes representation (new map).
    expect(keepsMap("0")).toBe(false);
    // DOUBLE_ZERO made the way double-zero.ts makes it.
    const source = readFileSync(new URL("../src/double-zero.ts", import.meta.url), "utf8");
    const initializer = /export const DOUBLE_ZERO: number = (.+?)(?: as number)?;/.exec(source)?.[1];
    expect(initializer).toBeDefined();
    expect(keepsMap(initializer as string)).toBe(true);
  });
});
