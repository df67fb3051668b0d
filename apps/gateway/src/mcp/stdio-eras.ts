import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** The `_meta` key by which a 2026-07-28 message claims its protocol revision (the per-request envelope). */
export const PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion";

/** True when a message carries the 2026-07-28 envelope claim (a session-era message never does). */
export function claimsModernEra(message: JSONRPCMessage): boolean {
  const params = (message as { params?: unknown }).params;
  const meta = (params as { _meta?: unknown } | undefined)?._meta;
  return typeof meta === "object" && meta !== null && PROTOCOL_VERSION_META_KEY in meta;
}

/** One era's side of the stdio connection: a transport whose messages are the ones routed to it. */
export class EraChannel implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #wire: Transport;
  #closed = false;

  constructor(wire: Transport) {
    this.#wire = wire;
  }

  async start(): Promise<void> {}

  send(message: JSONRPCMessage): Promise<void> {
    return this.#wire.send(message);
  }

  /** The server side closed this era's channel: the connection ends with it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.ended();
    await this.#wire.close();
  }

  /** The connection ended: the server on this channel hears it once. */
  ended(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.onclose?.();
  }
}

/**
 * Routes one stdio connection to the server of the era its client speaks. A session-era client opens
 * with `initialize` (or any message without the 2026-07-28 envelope) and is served by the SDK 1.x
 * server; a 2026-07-28 client's messages carry the envelope and go to SDK v2's stdio entry, which is
 * loaded then. A `server/discover` probe goes to the new era without deciding anything; the first
 * other message pins the connection to its era for good.
 */
export class StdioEras {
  readonly legacy: EraChannel;
  #modern: Promise<EraChannel> | null = null;
  #pinned: "legacy" | "modern" | null = null;
  /** Messages are handed on in arrival order, also while the new era's modules load. */
  #queue: Promise<void> = Promise.resolve();
  readonly #startModern: (channel: EraChannel) => Promise<void>;
  readonly #wire: Transport;

  constructor(wire: Transport, startModern: (channel: EraChannel) => Promise<void>) {
    this.#wire = wire;
    this.legacy = new EraChannel(wire);
    this.#startModern = startModern;
  }

  /** Routes one message from the client. */
  receive(message: JSONRPCMessage): void {
    const era = this.#pinned ?? (claimsModernEra(message) ? "modern" : "legacy");
    const isProbe = (message as { method?: unknown }).method === "server/discover";
    if (this.#pinned === null && !(era === "modern" && isProbe)) this.#pinned = era;
    if (era === "legacy" && this.#modern === null) {
      this.legacy.onmessage?.(message);
      return;
    }
    this.#queue = this.#queue.then(async () => {
      if (era === "legacy") this.legacy.onmessage?.(message);
      else (await this.#modernChannel()).onmessage?.(message);
    });
    this.#queue.catch((error) => this.legacy.onerror?.(error as Error));
  }

  #modernChannel(): Promise<EraChannel> {
    this.#modern ??= (async () => {
      const channel = new EraChannel(this.#wire);
      await this.#startModern(channel);
      return channel;
    })();
    return this.#modern;
  }

  /** The client closed stdin (or the stream failed): both eras' servers hear it. */
  async ended(): Promise<void> {
    this.legacy.ended();
    if (this.#modern) (await this.#modern).ended();
  }
}
