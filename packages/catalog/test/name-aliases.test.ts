import { describe, expect, it } from "vitest";
import { nameKey, nameWords, unicodeNameWords as unicodeWords } from "../src/name-aliases.js";

/** Every string of up to `length` characters from `alphabet`. */
function allStrings(alphabet: string, length: number): string[] {
  let level = [""];
  const all = [""];
  for (let size = 1; size <= length; size++) {
    level = level.flatMap((prefix) => [...alphabet].map((char) => prefix + char));
    all.push(...level);
  }
  return all;
}

describe("nameWords", () => {
  it("splits the spellings a model writes into the same words", () => {
    for (const name of ["readFile", "read_file", "Read-File", "READ_FILE", "read file", "READFile"]) {
      expect(nameWords(name)).toEqual(["read", "file"]);
    }
    expect(nameWords("createEntities2")).toEqual(["create", "entities2"]);
    expect(nameWords("get$value")).toEqual(["get$value"]);
    expect(nameKey("Read-File")).toBe(nameKey("read_file"));
  });

  it("gives for ASCII names exactly what the Unicode rules give", () => {
    // Lower, upper, digit, "$", separators and a control character: every string up to 5 of them.
    const names = allStrings("aZb9Y$_- \t", 5);
    expect(names.length).toBeGreaterThan(100_000);
    // One comparison of the words as JSON per name, and one assertion on the names that differ: an
    // expect() per name costs more than the split itself, a hundred thousand times over.
    const differing = names.filter(
      (name) => JSON.stringify(nameWords(name)) !== JSON.stringify(unicodeWords(name)),
    );
    expect(differing.slice(0, 10)).toEqual([]);
    for (const name of ["getHTTPResponseCode", "XMLHttpRequest", "mcp.memory.create_entities", "a1B2c3"]) {
      expect(nameWords(name)).toEqual(unicodeWords(name));
    }
    // The enumeration takes a second or two on an idle machine; a loaded one may be ten times slower.
  }, 120_000);

  it("keeps the Unicode rules for other names", () => {
    expect(nameWords("größeÄndern")).toEqual(["größe", "ändern"]);
    expect(nameWords("日本語_tool")).toEqual(unicodeWords("日本語_tool"));
  });
});
