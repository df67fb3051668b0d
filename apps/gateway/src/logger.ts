/**
 * Every line the gateway writes to stderr goes through here. Human format (the default) writes each
 * line exactly as it always read (`codecell: ...`, `[codecell:tag] ...`); JSON format
 * (`--log-format json` or `logging.format`) writes one object per line with `level`, `time`, `message`
 * and, where there is one, `runId`, `session` and `traceId`, for a log pipeline to parse. stdout is never
 * written: over stdio it carries the protocol.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFormat = "human" | "json";
export type LogFields = {
  runId?: string;
  session?: string;
  traceId?: string;
  [field: string]: unknown;
};

// The OpenTelemetry API's global slot (one per major version): read to find the active trace without
// loading the API when no one registered anything with it.
const GLOBAL_API_KEY = Symbol.for("opentelemetry.js.api.1");

type ActiveSpanReader = () => string | undefined;
let activeTraceId: ActiveSpanReader | null = null;

/** Lets the telemetry set-up say how to read the active trace id (only it loads the API). */
export function setActiveTraceReader(reader: ActiveSpanReader | null): void {
  activeTraceId = reader;
}

function currentTraceId(): string | undefined {
  if (activeTraceId === null) return undefined;
  if ((globalThis as Record<symbol, unknown>)[GLOBAL_API_KEY] === undefined) return undefined;
  return activeTraceId();
}

let format: LogFormat = "human";
let write: (line: string) => void = (line) => process.stderr.write(line);

export function setLogFormat(next: LogFormat): void {
  format = next;
}

export function logFormat(): LogFormat {
  return format;
}

/** Where lines go (tests capture them); default stderr. */
export function setLogSink(sink: ((line: string) => void) | null): void {
  write = sink ?? ((line) => process.stderr.write(line));
}

/**
 * One log record. `human` is the line as the human format shows it (without the newline); the JSON
 * format uses `message` and the fields instead.
 */
export function log(level: LogLevel, message: string, fields: LogFields = {}, human?: string): void {
  if (format === "human") {
    write(
      `${human ?? `codecell: ${level === "warn" ? "warning: " : level === "error" ? "error: " : ""}${message}`}\n`,
    );
    return;
  }
  const record: Record<string, unknown> = { level, time: new Date().toISOString(), message };
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) record[key] = value;
  if (record.traceId === undefined) {
    const traceId = currentTraceId();
    if (traceId !== undefined) record.traceId = traceId;
  }
  write(`${JSON.stringify(record)}\n`);
}

/**
 * An operator line as the gateway has always written it (`codecell: <text>`), with its level read
 * from the `warning: ` prefix the human format keeps.
 */
export function operatorLine(text: string, fields?: LogFields): void {
  if (text.startsWith("warning: ")) log("warn", text.slice("warning: ".length), fields, `codecell: ${text}`);
  else log("info", text, fields, `codecell: ${text}`);
}
