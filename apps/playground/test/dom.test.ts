import { describe, expect, it } from "vitest";
import { formatBytes, formatDuration } from "../src/dom.js";

describe("formatDuration", () => {
  it.each<[number | undefined, string]>([
    [0, "<1 ms"],
    [0.4, "<1 ms"],
    [1, "1 ms"],
    [12.4, "12 ms"],
    [999.6, "1000 ms"],
    [1250, "1.25 s"],
    [undefined, ""],
    [Number.NaN, ""],
  ])("%s ms reads %j", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("formatBytes", () => {
  it.each<[number | undefined, string]>([
    [812, "812 B"],
    [4300, "4.2 KB"],
    [1_468_006, "1.4 MB"],
    [undefined, ""],
  ])("%s bytes reads %j", (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});
