import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { type HttpSessionEntry, HttpSessionTable } from "../../src/http/http-sessions.js";

let counter = 0;
function entry(principal: string, lastSeen: number, extra: Partial<HttpSessionEntry> = {}): HttpSessionEntry {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const id = `s${++counter}`;
  return { id, principal, transport, lastSeen, open: 0, holdsWaitingRun: () => false, ...extra };
}

const limits = { maxSessionsPerPrincipal: 3, idleMs: 1000, holdingIdleMs: 60_000 };

describe("HttpSessionTable", () => {
  it("makes room by closing the principal's oldest idle session that holds no waiting run", async () => {
    const table = new HttpSessionTable(limits);
    const holding = entry("alice", 1, { holdsWaitingRun: () => true });
    const busy = entry("alice", 2, { open: 1 });
    const oldestIdle = entry("alice", 3);
    for (const e of [holding, busy, oldestIdle]) table.add(e);
    expect(await table.makeRoom("alice")).toBe(true);
    expect(table.values().map((e) => e.id)).toEqual([holding.id, busy.id]);
    table.add(entry("alice", 4, { open: 1 }));
    // Every session is busy or holds a waiting run: alice is refused, and only alice.
    expect(await table.makeRoom("alice")).toBe(false);
    expect(table.get(holding.id)).toBe(holding);
    expect(await table.makeRoom("bob")).toBe(true);
  });

  it("never lets one principal's flood take another's sessions", async () => {
    const table = new HttpSessionTable(limits);
    const bobs = [entry("bob", 0), entry("bob", 0)];
    for (const e of bobs) table.add(e);
    for (let i = 0; i < 50; i++) {
      expect(await table.makeRoom("mallory")).toBe(true);
      table.add(entry("mallory", 100 + i));
    }
    expect(table.values().filter((e) => e.principal === "mallory")).toHaveLength(3);
    expect(table.values().filter((e) => e.principal === "bob")).toEqual(bobs);
  });

  it("sweeps idle sessions, keeping those holding a waiting run until the run's TTL", async () => {
    const table = new HttpSessionTable(limits);
    const idle = entry("a", 0);
    const holding = entry("a", 0, { holdsWaitingRun: () => true });
    const streaming = entry("a", 0, { open: 1 });
    const fresh = entry("a", 5000);
    for (const e of [idle, holding, streaming, fresh]) table.add(e);
    expect(await table.sweep(5500)).toBe(1);
    expect(table.get(idle.id)).toBeUndefined();
    expect(await table.sweep(61_000)).toBe(2);
    expect(table.values()).toEqual([streaming]);
  });
});
