import { upstreamLimitError } from "./limits.js";

const LF = 0x0a;
const CR = 0x0d;

/**
 * The `data:` payloads of a server-sent event stream, one per event, in order (multi-line data joined
 * with newlines, comments and other fields skipped). Ends when the stream does; throws once `signal`
 * aborts (the transport ends the body then, too). Lines end at LF, CRLF or CR.
 *
 * Each byte is looked at once: a line that has not ended yet is kept as the pieces it came in, not
 * searched again when the next chunk arrives. A line, or an event's data lines together, longer than
 * `maxEventBytes` fails the stream (an upstream-class error naming the limit) before more is held.
 */
export async function* readSseEvents(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal,
  maxEventBytes = Number.POSITIVE_INFINITY,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  /** The line that has not ended yet, in the pieces it came in (decoded), and its size in bytes. */
  let pieces: string[] = [];
  let lineBytes = 0;
  let data: string[] = [];
  let eventBytes = 0;
  /** The last chunk ended in CR: an LF that starts the next one belongs to the same line end. */
  let afterCr = false;
  const tooLong = () =>
    upstreamLimitError(`an SSE event of more than ${maxEventBytes} bytes`, "maxSseEventBytes", maxEventBytes);
  const endLine = (): string | null => {
    const line = pieces.length === 1 ? pieces[0]! : pieces.join("");
    pieces = [];
    lineBytes = 0;
    if (line === "") {
      const event = data.length ? data.join("\n") : null;
      data = [];
      eventBytes = 0;
      return event;
    }
    if (line.startsWith("data:")) {
      const value = line.slice(line[5] === " " ? 6 : 5);
      eventBytes += Buffer.byteLength(value) + 1;
      if (eventBytes > maxEventBytes) throw tooLong();
      data.push(value);
    }
    return null;
  };
  for await (const value of body) {
    if (signal.aborted) throw signal.reason ?? new Error("aborted");
    let start = 0;
    if (afterCr && value[0] === LF) start = 1;
    afterCr = false;
    // The next line end, found by the native search: each byte is searched once.
    let lf = value.indexOf(LF, start);
    let cr = value.indexOf(CR, start);
    while (lf >= 0 || cr >= 0) {
      const at = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      const byte = value[at];
      // A line end: the bytes before it finish the line (a multi-byte character never holds CR or LF).
      pieces.push(decoder.decode(value.subarray(start, at), { stream: true }));
      lineBytes += at - start;
      if (lineBytes > maxEventBytes) throw tooLong();
      const event = endLine();
      if (event !== null) yield event;
      let end = at;
      if (byte === CR) {
        if (at + 1 < value.length) {
          if (value[at + 1] === LF) end = at + 1;
        } else afterCr = true;
      }
      start = end + 1;
      if (lf >= 0 && lf < start) lf = value.indexOf(LF, start);
      if (cr >= 0 && cr < start) cr = value.indexOf(CR, start);
    }
    if (start < value.length) {
      lineBytes += value.length - start;
      if (lineBytes > maxEventBytes) throw tooLong();
      pieces.push(decoder.decode(value.subarray(start), { stream: true }));
    }
  }
  if (signal.aborted) throw signal.reason ?? new Error("aborted");
  pieces.push(decoder.decode());
  const last = endLine();
  if (last !== null) yield last;
  if (data.length) yield data.join("\n");
}
