import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

/** One MCP session over HTTP, as the session table keeps it. */
export type HttpSessionEntry = {
  id: string;
  principal: string;
  transport: StreamableHTTPServerTransport;
  /** When the session last received a request (or finished one). */
  lastSeen: number;
  /** Requests still open: a POST being answered, or a GET stream. A session with any is not idle. */
  open: number;
  /** True while the session holds a waiting run: it is evicted last, and only once its runs could be gone. */
  holdsWaitingRun(): boolean;
};

export type SessionLimits = {
  maxSessionsPerPrincipal: number;
  /** A session with no open request for this long is closed. */
  idleMs: number;
  /** A session holding a waiting run is closed only after this long idle (the run's TTL by then). */
  holdingIdleMs: number;
};

/**
 * The HTTP transport's sessions, with a cap per principal: a full principal makes room by closing its
 * own oldest idle session that holds no waiting run, so one principal's flood never locks out another,
 * and closing a session never loses a run (runs belong to their owner, not to the session).
 */
export class HttpSessionTable {
  readonly #entries = new Map<string, HttpSessionEntry>();
  readonly #limits: SessionLimits;

  constructor(limits: SessionLimits) {
    this.#limits = limits;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(id: string): HttpSessionEntry | undefined {
    return this.#entries.get(id);
  }

  add(entry: HttpSessionEntry): void {
    this.#entries.set(entry.id, entry);
  }

  delete(id: string): boolean {
    return this.#entries.delete(id);
  }

  values(): HttpSessionEntry[] {
    return [...this.#entries.values()];
  }

  #count(principal: string): number {
    let count = 0;
    for (const entry of this.#entries.values()) if (entry.principal === principal) count++;
    return count;
  }

  /**
   * Makes room for one more session of `principal`; false when every one of its sessions is busy or
   * holds a waiting run (then the new session is refused, and only this principal is affected).
   */
  async makeRoom(principal: string): Promise<boolean> {
    while (this.#count(principal) >= this.#limits.maxSessionsPerPrincipal) {
      let oldest: HttpSessionEntry | null = null;
      for (const entry of this.#entries.values()) {
        if (entry.principal !== principal || entry.open > 0 || entry.holdsWaitingRun()) continue;
        if (!oldest || entry.lastSeen < oldest.lastSeen) oldest = entry;
      }
      if (!oldest) return false;
      await this.#close(oldest);
    }
    return true;
  }

  /** Closes sessions idle past their limit (clients that went away without a DELETE). */
  async sweep(now = Date.now()): Promise<number> {
    let closed = 0;
    for (const entry of [...this.#entries.values()]) {
      if (entry.open > 0) continue;
      const limit = entry.holdsWaitingRun() ? this.#limits.holdingIdleMs : this.#limits.idleMs;
      if (now - entry.lastSeen <= limit) continue;
      await this.#close(entry);
      closed++;
    }
    return closed;
  }

  async closeAll(): Promise<void> {
    for (const entry of [...this.#entries.values()]) await this.#close(entry);
  }

  async #close(entry: HttpSessionEntry): Promise<void> {
    this.#entries.delete(entry.id);
    await entry.transport.close().catch(() => {});
  }
}
