import type { EventStore } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

type StoredEvent = { id: string; streamId: string; message: JSONRPCMessage };

/**
 * The SDK's event store interface, kept in memory for one MCP session: the last `limit` messages sent
 * on its SSE streams, so a client that reconnects with `Last-Event-ID` gets what it missed (a tool
 * result included). Bounded, so a session that never reconnects cannot grow it.
 */
export class BoundedEventStore implements EventStore {
  readonly #events: StoredEvent[] = [];
  readonly #limit: number;
  #next = 0;

  constructor(limit = 1000) {
    this.#limit = limit;
  }

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    // The stream id is part of the event id, so a reconnect finds its stream even once older events are gone.
    const id = `${streamId}_${++this.#next}`;
    this.#events.push({ id, streamId, message });
    if (this.#events.length > this.#limit) this.#events.splice(0, this.#events.length - this.#limit);
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
