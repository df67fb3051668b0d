/**
 * The fast path of a quick nested call between a host thread and one sandbox worker: a message handed
 * over through shared memory to a side that is spinning for it, instead of a `postMessage` and a thread
 * wake-up. On a paravirtualised guest a hop's cost is its system calls (futex wake, eventfd, epoll): two
 * threads that each spin a few tens of microseconds on a shared word before they sleep cross in about a
 * quarter of the time (and less CPU) than two that sleep at once.
 *
 * One buffer per worker holds two one-message slots, one per direction, and four counters. A slot is:
 *   IDLE       its receiver is not listening: the sender posts on the port, as without this channel;
 *   LISTENING  its receiver is spinning (or waiting) for the next message;
 *   FULL       the sender wrote a message and handed it over.
 * The receiver alone moves IDLE -> LISTENING, FULL -> LISTENING | IDLE, and (by compare-and-exchange)
 * LISTENING -> IDLE when it stops listening; the sender alone moves LISTENING -> FULL, by
 * compare-and-exchange, after writing the bytes. Whichever exchange wins decides the path, so a message
 * is never lost or taken twice: a sender whose exchange fails posts on the port.
 *
 * Order: a side hands a message over through its slot only when every message it posted on the port has
 * been taken by the other side (the counters), so a message through the slot never overtakes one on the
 * port; and a receiver handles a message from its slot before anything it finds on its port afterwards.
 * `init`, `ready` and `init-failed` are not counted (the early worker exchanges them before the channel
 * exists).
 */

/** Bytes of one message slot (UTF-8 JSON text); a longer message takes the port. */
export const SHARED_SLOT_BYTES = 8 * 1024;

const SLOT_IDLE = 0;
const SLOT_LISTENING = 1;
const SLOT_FULL = 2;

/** Int32 words at the start of the buffer. */
const TO_HOST_STATE = 0;
const TO_HOST_LENGTH = 1;
const TO_WORKER_STATE = 2;
const TO_WORKER_LENGTH = 3;
/** Run messages the worker posted on its port, and how many of them the host took. */
const WORKER_POSTED = 4;
const HOST_TOOK = 5;
/** Run messages the host posted on the worker's port, and how many of them the worker took. */
const HOST_POSTED = 6;
const WORKER_TOOK = 7;
const HEADER_BYTES = 8 * 4;

/** The shared memory of one worker's channel, made by the host and sent to the worker in `init`. */
export function createSharedChannelBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(HEADER_BYTES + 2 * SHARED_SLOT_BYTES);
}

/** Whether a value is a buffer `createSharedChannelBuffer` could have made. */
export function isSharedChannelBuffer(value: unknown): value is SharedArrayBuffer {
  return value instanceof SharedArrayBuffer && value.byteLength === HEADER_BYTES + 2 * SHARED_SLOT_BYTES;
}

/** Whether a message on the port is counted for ordering (see the module comment). */
export function countsOnPort(type: unknown): boolean {
  return type !== "init" && type !== "ready" && type !== "init-failed";
}

/** One side's view of a worker's channel. */
export class SharedChannel {
  private readonly words: Int32Array;
  private readonly outState: number;
  private readonly outLength: number;
  private readonly inState: number;
  private readonly inLength: number;
  private readonly posted: number;
  private readonly peerTook: number;
  private readonly peerPosted: number;
  private readonly took: number;
  private readonly outBytes: Buffer;
  private readonly inBytes: Buffer;
  /** This side's own count of port posts and port messages taken (the shared words mirror them). */
  private postedCount = 0;
  private tookCount = 0;

  constructor(buffer: SharedArrayBuffer, side: "host" | "worker") {
    this.words = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    const toHost = Buffer.from(buffer, HEADER_BYTES, SHARED_SLOT_BYTES);
    const toWorker = Buffer.from(buffer, HEADER_BYTES + SHARED_SLOT_BYTES, SHARED_SLOT_BYTES);
    const host = side === "host";
    this.outState = host ? TO_WORKER_STATE : TO_HOST_STATE;
    this.outLength = host ? TO_WORKER_LENGTH : TO_HOST_LENGTH;
    this.inState = host ? TO_HOST_STATE : TO_WORKER_STATE;
    this.inLength = host ? TO_HOST_LENGTH : TO_WORKER_LENGTH;
    this.posted = host ? HOST_POSTED : WORKER_POSTED;
    this.peerTook = host ? WORKER_TOOK : HOST_TOOK;
    this.peerPosted = host ? WORKER_POSTED : HOST_POSTED;
    this.took = host ? HOST_TOOK : WORKER_TOOK;
    this.outBytes = host ? toWorker : toHost;
    this.inBytes = host ? toHost : toWorker;
  }

  /** This side posted a counted message on the port. */
  notePosted(): void {
    this.postedCount += 1;
    Atomics.store(this.words, this.posted, this.postedCount);
  }

  /** This side took a counted message off the port. */
  noteTaken(): void {
    this.tookCount += 1;
    Atomics.store(this.words, this.took, this.tookCount);
  }

  /** Whether everything the other side posted on the port has been taken here. */
  caughtUp(): boolean {
    return Atomics.load(this.words, this.peerPosted) === this.tookCount;
  }

  /**
   * Whether a message sent now could go through the slot: the other side is listening and has taken
   * everything this side posted on the port. (Checked before the message is encoded; `send` decides.)
   */
  canSend(): boolean {
    return (
      Atomics.load(this.words, this.outState) === SLOT_LISTENING &&
      Atomics.load(this.words, this.peerTook) === this.postedCount
    );
  }

  /** Whether the other side is listening on the slot this side sends through. */
  peerListening(): boolean {
    return Atomics.load(this.words, this.outState) === SLOT_LISTENING;
  }

  /**
   * Hand `text` over through the slot. False when it cannot (the other side is not listening or stopped
   * meanwhile, the port has messages of this side in flight, the text is longer than the slot): the
   * caller posts it on the port instead.
   */
  send(text: string): boolean {
    if (!this.canSend()) return false;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a short text needs no count.
    if (text.length * 3 > SHARED_SLOT_BYTES && Buffer.byteLength(text, "utf8") > SHARED_SLOT_BYTES)
      return false;
    const length = this.outBytes.write(text, 0, "utf8");
    Atomics.store(this.words, this.outLength, length);
    return Atomics.compareExchange(this.words, this.outState, SLOT_LISTENING, SLOT_FULL) === SLOT_LISTENING;
  }

  /** Start listening on this side's slot (it must be IDLE: this side is not listening already). */
  listen(): void {
    Atomics.store(this.words, this.inState, SLOT_LISTENING);
  }

  /** Whether a message waits in this side's slot. */
  full(): boolean {
    return Atomics.load(this.words, this.inState) === SLOT_FULL;
  }

  /**
   * The message in this side's slot, or null. With `keepListening` the slot is free for the next one
   * at once; without, this side has stopped listening.
   */
  take(keepListening: boolean): string | null {
    if (Atomics.load(this.words, this.inState) !== SLOT_FULL) return null;
    const length = Atomics.load(this.words, this.inLength);
    const text = this.inBytes.toString("utf8", 0, Math.min(Math.max(0, length), SHARED_SLOT_BYTES));
    Atomics.store(this.words, this.inState, keepListening ? SLOT_LISTENING : SLOT_IDLE);
    return text;
  }

  /**
   * Stop listening. Returns the message the other side handed over just before (its exchange won the
   * race), which the caller must handle, or null.
   */
  stopListening(): string | null {
    if (Atomics.compareExchange(this.words, this.inState, SLOT_LISTENING, SLOT_IDLE) === SLOT_LISTENING)
      return null;
    return this.take(false);
  }

  /** How many counted messages the other side has posted on the port (a change ends a spin early). */
  peerPostedCount(): number {
    return Atomics.load(this.words, this.peerPosted);
  }
}
