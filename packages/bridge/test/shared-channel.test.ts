import { describe, expect, it } from "vitest";
import {
  countsOnPort,
  createSharedChannelBuffer,
  isSharedChannelBuffer,
  SHARED_SLOT_BYTES,
  SharedChannel,
} from "../src/shared-channel.js";

// Both ends in one thread: every interleaving below is one the two threads can produce, taken in a
// fixed order, so each race is decided the same way every run.
function pair() {
  const buffer = createSharedChannelBuffer();
  return { host: new SharedChannel(buffer, "host"), worker: new SharedChannel(buffer, "worker") };
}

describe("the shared channel", () => {
  it("hands a message over only to a side that listens, once", () => {
    const { host, worker } = pair();
    expect(worker.peerListening()).toBe(false);
    expect(worker.send('{"a":1}')).toBe(false);
    host.listen();
    expect(worker.peerListening()).toBe(true);
    expect(worker.send('{"a":1}')).toBe(true);
    // The slot is full: a second message waits for the port.
    expect(worker.send('{"a":2}')).toBe(false);
    expect(host.full()).toBe(true);
    expect(host.take(false)).toBe('{"a":1}');
    expect(host.take(false)).toBeNull();
    // Not listening any more.
    expect(worker.send('{"a":3}')).toBe(false);
  });

  it("keeps listening after a take when asked, and carries both directions apart", () => {
    const { host, worker } = pair();
    worker.listen();
    host.listen();
    expect(host.send("down 1")).toBe(true);
    expect(worker.send("up 1")).toBe(true);
    expect(worker.take(true)).toBe("down 1");
    expect(host.send("down 2")).toBe(true);
    expect(worker.take(true)).toBe("down 2");
    expect(host.take(false)).toBe("up 1");
    expect(worker.stopListening()).toBeNull();
    expect(host.send("down 3")).toBe(false);
  });

  it("gives a message handed over just before the receiver stops listening to the receiver, not to the port", () => {
    const { host, worker } = pair();
    host.listen();
    expect(worker.send("raced")).toBe(true);
    // The receiver's exchange loses: stopListening returns the message it must handle.
    expect(host.stopListening()).toBe("raced");
    expect(host.full()).toBe(false);
    expect(worker.send("after")).toBe(false);
  });

  it("sends nothing through the slot while a port message of the sender is not taken yet", () => {
    const { host, worker } = pair();
    host.listen();
    worker.notePosted();
    expect(host.caughtUp()).toBe(false);
    expect(worker.canSend()).toBe(false);
    expect(worker.send("would overtake")).toBe(false);
    host.noteTaken();
    expect(host.caughtUp()).toBe(true);
    expect(worker.send("in order")).toBe(true);
    expect(host.take(false)).toBe("in order");
    expect(host.peerPostedCount()).toBe(1);
  });

  it("refuses text longer than the slot and carries non-ASCII text exactly", () => {
    const { host, worker } = pair();
    host.listen();
    expect(worker.send("x".repeat(SHARED_SLOT_BYTES + 1))).toBe(false);
    // Fewer UTF-16 units than the slot has bytes, more UTF-8 bytes than it holds.
    expect(worker.send("é".repeat(SHARED_SLOT_BYTES / 2 + 1))).toBe(false);
    const text = JSON.stringify({ text: "héllo 😀 \ud800 ok", full: "x".repeat(SHARED_SLOT_BYTES - 64) });
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(SHARED_SLOT_BYTES);
    expect(worker.send(text)).toBe(true);
    const taken = host.take(false);
    expect(taken).toBe(text);
    expect(JSON.parse(taken as string).text).toBe("héllo 😀 \ud800 ok");
  });

  it("recognises its buffer and counts only run messages", () => {
    expect(isSharedChannelBuffer(createSharedChannelBuffer())).toBe(true);
    expect(isSharedChannelBuffer(new SharedArrayBuffer(8))).toBe(false);
    expect(isSharedChannelBuffer(new ArrayBuffer(32 + 2 * SHARED_SLOT_BYTES))).toBe(false);
    expect(["init", "ready", "init-failed"].map(countsOnPort)).toEqual([false, false, false]);
    expect(["settle", "idle", "dispose", undefined].map(countsOnPort)).toEqual([true, true, true, true]);
  });
});
