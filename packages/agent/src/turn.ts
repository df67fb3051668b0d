import type { FinishReason } from "./finish-reasons.js";

/**
 * The loop's own representation of a conversation, independent of any wire format: a front (OpenAI
 * Chat Completions today) translates its requests into it, and an upstream kind translates it into the
 * body its model takes. Tool calls and their results are separate messages (as in Chat Completions);
 * a format that nests them in content blocks (the Messages API) maps one block to one message here.
 */

/** A tool call a model (or the loop, for a client tool) made; `arguments` is JSON text. */
export type TurnToolCall = { id: string; name: string; arguments: string };

/**
 * Content of system and user messages. A string, or the front's own content parts (images, files),
 * which the loop never reads and only an upstream of the same family sends on.
 */
export type TurnContent = string | readonly unknown[];

export type TurnMessage =
  | {
      role: "system";
      content: TurnContent;
      /**
       * The client placed it among its messages (a Messages API system message mid-conversation): a
       * Messages upstream keeps it there rather than joining it to the top-level system prompt.
       */
      inline?: boolean;
    }
  | { role: "user"; content: TurnContent }
  | {
      role: "assistant";
      content: string | null;
      toolCalls?: TurnToolCall[];
      /** The upstream's own reasoning items of this turn (opaque; only an upstream of that API reads them). */
      reasoning?: unknown[];
    }
  /**
   * A tool's result; `isError` when the caller reported a failure rather than a value. `images` are
   * the cell's `image(...)` output (only on the loop's own exec and wait results): `content` names
   * them by type and size, and each upstream kind sends them on in its own image form.
   */
  | {
      role: "tool";
      toolCallId: string;
      content: string;
      isError?: boolean;
      images?: readonly TurnImage[];
    };

/** An image a cell showed: base64 `data` of an image MIME type (one of IMAGE_MIME_TYPES). */
export type TurnImage = { mimeType: string; data: string };

/** An image as a data URL, the form the OpenAI APIs take inline images in. */
export function imageDataUrl(image: TurnImage): string {
  return `data:${image.mimeType};base64,${image.data}`;
}

/** A tool as a model is offered it: its JSON Schema parameters. */
export type TurnTool = { name: string; description: string; parameters: unknown };

export type TurnUsage = { promptTokens: number; completionTokens: number; totalTokens: number };

export function addUsage(total: TurnUsage, more: TurnUsage | null): void {
  if (!more) return;
  total.promptTokens += more.promptTokens;
  total.completionTokens += more.completionTokens;
  total.totalTokens += more.totalTokens;
}

/** One request to the upstream model. */
export type ModelRequest = {
  model: string;
  messages: readonly TurnMessage[];
  tools: readonly TurnTool[];
  /**
   * Names the model may be offered besides exec and wait when code mode drives the request; the
   * upstream refuses to send a body whose tools are anything else (fail closed). Null: no check
   * (a request the loop passes through).
   */
  codeModeDirectOnly: readonly string[] | null;
  /** Sampling and other parameters of the client's request, sent on as they are (temperature, ...). */
  params: Readonly<Record<string, unknown>>;
};

/** The upstream model's answer to one request. */
export type ModelReply = {
  content: string | null;
  toolCalls: TurnToolCall[];
  /** Why the model stopped, read through the finish-reason table from the upstream's own word. */
  finishReason: FinishReason;
  usage: TurnUsage | null;
  /** The model that answered, as the upstream names it. */
  model: string;
  /** Reasoning items the upstream returned (its encrypted chain), to send back with this turn. */
  reasoning?: unknown[];
};

export type ModelCallOptions = {
  signal: AbortSignal;
  /** Present: the upstream streams, and each piece of answer text is reported as it arrives. */
  onTextDelta?: (text: string) => void;
  /**
   * Headers for this one call's HTTP request, beside the upstream's own: the W3C trace context
   * (`traceparent`) of the call's span, so the model server's tracing joins the request's trace.
   */
  headers?: Readonly<Record<string, string>>;
  /**
   * Resolves once the client has taken the text reported so far: a streamed answer is read no further
   * upstream until then, so a client that does not read cannot make the endpoint hold the answer.
   */
  drained?: () => Promise<void>;
};

/** Where the loop's model calls go: an OpenAI-compatible server today, another API kind later. */
export interface ModelUpstream {
  /** `gen_ai.provider.name` of its model-call spans (default "openai"). */
  readonly providerName?: string;
  /** Where it sends requests, for the spans' `server.address` and `server.port`. */
  readonly baseUrl?: string;
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelReply>;
  /** The upstream's own `GET /models` answer (any shape with a `data` list of `id`s), or null. */
  models?(signal: AbortSignal): Promise<unknown>;
}
