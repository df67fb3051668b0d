import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { BoundedEventStore } from "../../src/http/event-store.js";

const note = (n: number, text = ""): JSONRPCMessage =>
  ({
    jsonrpc: "2.0",
    method: "notifications/message",
    params: { level: "info", data: { n, text } },
  }) as JSONRPCMessage;

async function replay(store: BoundedEventStore, after: string): Promise<number[]> {
  const seen: number[] = [];
  await store.replayEventsAfter(after, {
    send: async (_id, message) => {
      seen.push((message as unknown as { params: { data: { n: number } } }).params.data.n);
    },
  });
  return seen;
}

describe("the per-session event store behind Last-Event-ID", () => {
  it("replays what a stream missed after the client's last event, and nothing of other streams", async () => {
    const store = new BoundedEventStore();
    const first = await store.storeEvent("a", note(1));
    await store.storeEvent("b", note(100));
    await store.storeEvent("a", note(2));
    await store.storeEvent("a", note(3));
    expect(await store.getStreamIdForEventId(first)).toBe("a");
    expect(await replay(store, first)).toEqual([2, 3]);
  });

  it("is bounded in events and in bytes, oldest first, keeping the newest", async () => {
    const store = new BoundedEventStore(10, 10_000);
    for (let n = 0; n < 50; n++) await store.storeEvent("a", note(n));
    expect(store.size.events).toBe(10);
    const big = new BoundedEventStore(1000, 10_000);
    for (let n = 0; n < 20; n++) await big.storeEvent("a", note(n, "x".repeat(1000)));
    expect(big.size.bytes).toBeLessThanOrEqual(10_000);
    expect(big.size.events).toBeLessThan(10);
    const huge = await big.storeEvent("a", note(99, "y".repeat(50_000)));
    expect(big.size.events).toBe(1);
    expect(huge).toMatch(/^a_\d+$/);
  });
});
