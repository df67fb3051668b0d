/**
 * The model transport's debug switches, as the host read them (the gateway from
 * `CODECELL_DEBUG_MODEL_PAYLOAD`, `CODECELL_DEBUG_MODEL_TRANSPORT` and `CODECELL_DEBUG_SSE`). Lines go to
 * `line`; every value shown goes through `redact` first, so no key or secret reaches a log whole.
 */
export type UpstreamDebug = {
  /** `tools`: the tool names of each body sent upstream; `full-redacted`: the whole body, redacted. */
  payload: "tools" | "full-redacted" | null;
  /** Each upstream request (method, URL, status, time) and its answer, redacted. */
  transport: boolean;
  /** `events`: one line per upstream SSE event; `peek`: the first five events of each stream with data. */
  sse: "events" | "peek" | null;
  line(tag: string, text: string): void;
  redact(value: unknown): unknown;
};

export const SSE_PEEK_EVENTS = 5;
