import { describe, expect, it } from "vitest";
import { RequestTable } from "../src/request-table.js";

/** The same operations on a Map, the behaviour the table must keep. */
function both() {
  const table = new RequestTable<number>();
  const map = new Map<string, number>();
  return {
    table,
    set(id: string, value: number) {
      table.set(id, value);
      map.set(id, value);
    },
    delete(id: string) {
      expect(table.delete(id)).toBe(map.delete(id));
    },
    check() {
      expect(table.size).toBe(map.size);
      expect(table.values()).toEqual([...map.values()]);
      expect(table.entries()).toEqual([...map.entries()]);
      for (const id of ["r1", "r2", "r3", "r4", "nope"]) {
        expect(table.get(id)).toBe(map.get(id));
        expect(table.has(id)).toBe(map.has(id));
      }
    },
  };
}

describe("RequestTable", () => {
  it("holds one request at a time like a Map (the loop of awaited calls)", () => {
    const t = both();
    t.check();
    for (let index = 1; index <= 3; index++) {
      t.set(`r${index}`, index);
      t.check();
      t.delete("nope");
      t.delete(`r${index}`);
      t.check();
      t.delete(`r${index}`);
    }
  });

  it("keeps insertion order across the switch to a Map and back", () => {
    const t = both();
    t.set("r2", 2);
    t.set("r1", 1);
    t.set("r3", 3);
    t.check();
    // Replacing keeps the place.
    t.set("r1", 10);
    t.check();
    t.delete("r1");
    t.check();
    t.delete("r2");
    t.check();
    // The last one out, then a fresh start.
    t.delete("nope");
    t.delete("r3");
    t.check();
    t.set("r4", 4);
    t.set("r1", 1);
    t.check();
  });

  it("replaces a lone entry's value in place", () => {
    const t = both();
    t.set("r1", 1);
    t.set("r1", 2);
    t.check();
  });

  it("is emptied by clear, and entries() is a copy safe to change the table under", () => {
    const t = both();
    t.set("r1", 1);
    t.set("r2", 2);
    for (const [id] of t.table.entries()) t.delete(id);
    t.check();
    t.set("r3", 3);
    t.table.clear();
    expect(t.table.size).toBe(0);
    expect(t.table.values()).toEqual([]);
    expect(t.table.get("r3")).toBeUndefined();
  });
});
