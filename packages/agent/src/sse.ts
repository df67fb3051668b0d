/**
 * The `data:` payloads of a server-sent event stream, one per event, in order (multi-line data joined
 * with newlines, comments and other fields skipped). Ends when the stream does or `signal` aborts.
 */
export async function* readSseEvents(
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
): AsyncGenerator<string> {
  if (!body) return;
  const decoder = new TextDecoder();
  const reader = body.getReader();
  // Cancelling a stream that already failed rejects too; the abort reaches the caller through the read
  // it interrupts, so the cancel's own failure has no one to tell.
  const onAbort = () => void reader.cancel().catch(() => {});
  signal.addEventListener("abort", onAbort, { once: true });
  let buffer = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (signal.aborted) throw signal.reason ?? new Error("aborted");
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.search(/\r?\n/);
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === "\r" ? newline + 2 : newline + 1);
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        }
        newline = buffer.search(/\r?\n/);
      }
    }
    if (buffer.startsWith("data:")) data.push(buffer.slice(buffer[5] === " " ? 6 : 5));
    if (data.length) yield data.join("\n");
  } finally {
    signal.removeEventListener("abort", onAbort);
    reader.releaseLock();
  }
}
