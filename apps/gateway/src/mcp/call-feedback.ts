import type { CodeModeOutput } from "@codecell/contract";
import type { RunProgress } from "@codecell/engine";
import type { LoggingLevel, ServerNotification } from "@modelcontextprotocol/sdk/types.js";

/** At most one progress notification per this many ms for one call. */
export const PROGRESS_MIN_GAP_MS = 250;
/** While a call runs, progress goes out at least this often, so a long quiet cell still shows life. */
export const PROGRESS_HEARTBEAT_MS = 1000;

type Send = (notification: ServerNotification) => Promise<void>;

/**
 * `notifications/progress` for one exec or wait call whose request carried a `progressToken`: nested
 * calls started, settled and pending, the latest progress a nested tool reported (a downstream server's
 * own notifications, a plugin's updates), and the time so far. Rate-limited, and silent once stopped,
 * so nothing follows the call's result.
 */
export class CallProgress {
  readonly #token: string | number;
  readonly #send: Send;
  readonly #startedAt = Date.now();
  readonly #heartbeat: NodeJS.Timeout;
  #timer: NodeJS.Timeout | null = null;
  #lastSentAt = 0;
  #count = 0;
  #calls = { started: 0, settled: 0, pending: 0 };
  #tool: string | null = null;
  #stopped = false;

  constructor(token: string | number, send: Send) {
    this.#token = token;
    this.#send = send;
    this.#heartbeat = setInterval(() => this.#flush(), PROGRESS_HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** The engine's progress channel for this call. */
  readonly onProgress = (event: RunProgress): void => {
    if (this.#stopped) return;
    if (event.kind === "calls") {
      this.#calls = { started: event.started, settled: event.settled, pending: event.pending };
    } else {
      const share = event.total !== undefined ? `${event.progress}/${event.total}` : `${event.progress}`;
      this.#tool = `${event.toolId}: ${share}${event.message ? ` ${event.message}` : ""}`;
    }
    const wait = PROGRESS_MIN_GAP_MS - (Date.now() - this.#lastSentAt);
    if (wait <= 0) this.#flush();
    else this.#timer ??= setTimeout(() => this.#flush(), wait);
  };

  /** The message a client shows: time so far, nested calls, the latest tool report. */
  message(): string {
    const seconds = ((Date.now() - this.#startedAt) / 1000).toFixed(1);
    const { settled, pending } = this.#calls;
    const calls = `nested calls: ${settled} settled, ${pending} pending`;
    return `running ${seconds} s; ${calls}${this.#tool ? `; ${this.#tool}` : ""}`;
  }

  #flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#stopped) return;
    this.#lastSentAt = Date.now();
    // `progress` must grow with every notification; the count of updates does.
    this.#count++;
    // Progress is a courtesy: a client that cannot take it (its stream closed) still gets the result.
    void this.#send({
      method: "notifications/progress",
      params: { progressToken: this.#token, progress: this.#count, message: this.message() },
    }).catch(() => {});
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#heartbeat);
    if (this.#timer) clearTimeout(this.#timer);
  }
}

const SEVERITY: LoggingLevel[] = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency",
];

/**
 * The MCP `logging` capability of one session-era client: nothing is sent until `logging/setLevel`
 * sets the threshold, and messages go out as `notifications/message` with a logger per source: `codecell.run` for
 * run events, `mcp.<server>` for a downstream server's own log messages.
 */
export class ClientLog {
  /** Null until the client sets a level: logging is deprecated, so only a client that asks gets any. */
  #level: LoggingLevel | null = null;

  setLevel(level: LoggingLevel): void {
    this.#level = level;
  }

  allows(level: LoggingLevel): boolean {
    return this.#level !== null && SEVERITY.indexOf(level) >= SEVERITY.indexOf(this.#level);
  }

  /** Sends one message if the level allows it; `send` is the call's own stream, or the session's. */
  log(send: Send, level: LoggingLevel, logger: string, data: unknown): void {
    if (!this.allows(level)) return;
    // As for progress: a log message that cannot be sent changes nothing about the call.
    void send({ method: "notifications/message", params: { level, logger, data } }).catch(() => {});
  }
}

/** A downstream server's level, mapped onto MCP's (servers may send anything). */
export function loggingLevelOf(level: string): LoggingLevel {
  return (SEVERITY as string[]).includes(level) ? (level as LoggingLevel) : "info";
}

/** `console.<level>` in a cell, as an MCP logging level. */
const CONSOLE_SEVERITY: Record<string, LoggingLevel> = {
  log: "info",
  info: "info",
  warn: "warning",
  error: "error",
  debug: "debug",
};

/**
 * A cell's output items as log messages (`logging.cellOutput` in the config), one per item, with a
 * logger per source: `codecell.cell.console` (level from `console.<level>`), `codecell.cell.text` for
 * `text()`, `codecell.cell.json` for `json()`, `codecell.cell.image` for `image()` (type and size).
 */
export function cellOutputMessages(
  output: ReadonlyArray<CodeModeOutput>,
): Array<{ level: LoggingLevel; logger: string; data: unknown }> {
  return output.map((item) => {
    if (item.type === "json") return { level: "info", logger: "codecell.cell.json", data: item.value };
    // An image is logged by type and size: its base64 data is for the client's model, not a log.
    if (item.type === "image") {
      return {
        level: "info",
        logger: "codecell.cell.image",
        data: { mimeType: item.mimeType, bytes: item.data.length },
      };
    }
    if (item.level !== undefined) {
      return {
        level: CONSOLE_SEVERITY[item.level] ?? "info",
        logger: "codecell.cell.console",
        data: item.text,
      };
    }
    return { level: "info", logger: "codecell.cell.text", data: item.text };
  });
}
