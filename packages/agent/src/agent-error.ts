/**
 * What the endpoint answers when a request cannot be served: an HTTP status and a message that says
 * what happened and what to do. Fronts render it in their API's error shape.
 */
export type AgentErrorKind =
  /** The client's request is wrong (fix it and send again). */
  | "invalid_request"
  /** Nothing is served at the path (or the endpoint is off), or what the request names (a stored response) is not there or not the principal's. */
  | "not_found"
  /** Tool results for calls that are not pending, or a run already being resumed. */
  | "conflict"
  /** The upstream model answered with an error status. */
  | "upstream_error"
  /** The upstream could not be reached or did not answer in time. */
  | "upstream_unavailable"
  /** The upstream's answer could not be read, or called a tool other than exec and wait. */
  | "upstream_malformed"
  /** The model used its turns for this request without answering. */
  | "turn_limit"
  /** The client went away or cancelled. */
  | "aborted"
  | "internal";

const STATUS: Record<AgentErrorKind, number> = {
  invalid_request: 400,
  not_found: 404,
  conflict: 409,
  upstream_error: 502,
  upstream_unavailable: 504,
  upstream_malformed: 502,
  turn_limit: 422,
  aborted: 499,
  internal: 500,
};

export class AgentError extends Error {
  readonly kind: AgentErrorKind;
  readonly status: number;
  /** The upstream's own status, for `upstream_error`. */
  readonly upstreamStatus: number | undefined;
  /** Headers the client gets with the error: an upstream's `retry-after`, passed on. */
  readonly headers: Readonly<Record<string, string>>;
  /** Machine-readable details a client reads from the error body (`error.details`), when there are any. */
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(
    kind: AgentErrorKind,
    message: string,
    options: {
      upstreamStatus?: number;
      cause?: unknown;
      headers?: Record<string, string>;
      details?: Record<string, unknown>;
    } = {},
  ) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = "AgentError";
    this.kind = kind;
    this.upstreamStatus = options.upstreamStatus;
    this.headers = options.headers ?? {};
    this.details = options.details;
    // A client error of the upstream (its 4xx, such as an unknown model) is the client's to fix.
    this.status =
      kind === "upstream_error" && options.upstreamStatus !== undefined && options.upstreamStatus < 500
        ? options.upstreamStatus
        : STATUS[kind];
  }

  static is(value: unknown): value is AgentError {
    return value instanceof AgentError;
  }
}
