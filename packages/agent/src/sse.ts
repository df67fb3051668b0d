/**
 * The `data:` payloads of a server-sent event stream, one per event, in order (multi-line data joined
 * with newlines, comments and other fields skipped). Ends when the stream does; throws once `signal`
 * aborts (the transport ends the body then, too).
 */
export async function* readSseEvents(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  for await (const value of body) {
    if (signal.aborted) throw signal.reason ?? new Error("aborted");
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
  if (signal.aborted) throw signal.reason ?? new Error("aborted");
  if (buffer.startsWith("data:")) data.push(buffer.slice(buffer[5] === " " ? 6 : 5));
  if (data.length) yield data.join("\n");
}
