import type { EventStore } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

type StoredEvent = { id: string; streamId: string; message: JSONRPCMessage; bytes: number };

/** Events kept per session, and their total size: a session that never reconnects cannot grow past. */
export const EVENT_STORE_LIMITS = { events: 1000, bytes: 16 * 1024 * 1024 };

/**
 * The SDK's event store interface, kept in memory for one MCP session: the last `limit` messages sent
 * on its SSE streams, so a client that reconnects with `Last-Event-ID` gets what it missed (a tool
 * result included). Bounded, so a session that never reconnects cannot grow it.
 */
export class BoundedEventStore implements EventStore {
  readonly #events: StoredEvent[] = [];
  readonly #limit: number;
  readonly #maxBytes: number;
  #bytes = 0;
  #next = 0;

  constructor(limit = EVENT_STORE_LIMITS.events, maxBytes = EVENT_STORE_LIMITS.bytes) {
    this.#limit = limit;
    this.#maxBytes = maxBytes;
  }

  /** Events and bytes held now. */
  get size(): { events: number; bytes: number } {
    return { events: this.#events.length, bytes: this.#bytes };
  }

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    // The stream id is part of the event id, so a reconnect finds its stream even once older events are gone.
    const id = `${streamId}_${++this.#next}`;
    const bytes = JSON.stringify(message).length;
    this.#events.push({ id, streamId, message, bytes });
    this.#bytes += bytes;
    // Oldest first; the newest event always stays, so a large result can still be replayed once.
    while (this.#events.length > 1 && (this.#events.length > this.#limit || this.#bytes > this.#maxBytes)) {
      this.#bytes -= this.#events.shift()!.bytes;
    }
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    const cut = eventId.lastIndexOf("_");
    return cut > 0 ? eventId.slice(0, cut) : undefined;
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const streamId = (await this.getStreamIdForEventId(lastEventId)) ?? "";
    const sequence = Number(lastEventId.slice(lastEventId.lastIndexOf("_") + 1));
    for (const event of this.#events) {
      if (event.streamId !== streamId) continue;
      if (Number(event.id.slice(event.id.lastIndexOf("_") + 1)) <= sequence) continue;
      await send(event.id, event.message);
    }
    return streamId;
  }
}
