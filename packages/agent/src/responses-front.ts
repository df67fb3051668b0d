import { AgentError } from "./agent-error.js";
import type { AgentLoop } from "./agent-loop.js";
import type { UpstreamApi } from "./anthropic-messages.js";
import {
  type ChatCompletionsContext,
  drainedOf,
  openAiErrorBody,
  type ResponseSink,
} from "./chat-completions-front.js";
import { chatToolChoiceForMessages } from "./chat-to-messages.js";
import type { FinishReason } from "./finish-reasons.js";
import { checkClientToolCount, DEFAULT_LIMITS } from "./limits.js";
import { completeTraced } from "./model-call-span.js";
import type { ResponseStore, StoredResponse } from "./response-store.js";
import {
  chatToolChoice,
  fromResponsesInput,
  ResponseIds,
  responseOfItem,
  responsesEnding,
  toResponsesOutput,
  toResponsesUsage,
} from "./responses-items.js";
import { responsesParams } from "./responses-params.js";
import { ResponsesStreamWriter } from "./responses-stream.js";
import { fromResponsesTools, type HostedToolPolicy } from "./responses-tools.js";
import type { ModelUpstream, TurnMessage, TurnToolCall, TurnUsage } from "./turn.js";

export type ResponsesFrontOptions = {
  loop: AgentLoop;
  /** The upstream of requests the loop does not take over: one model call with the client's tools. */
  upstream: ModelUpstream;
  /** The format the upstream speaks: parameters are written for it. */
  upstreamApi: UpstreamApi;
  /** Where responses answered with `store` on are kept (for GET, DELETE and `previous_response_id`). */
  responses: ResponseStore;
  /** How long a stored response is kept. Default 3600 (the transcripts' TTL). */
  storeTtlSeconds?: number;
  /** Hosted tools (web_search, local_shell, ...) no cell can run: left out of the run, or refused. */
  hostedTools?: HostedToolPolicy;
  /** Used when a request names no model. */
  defaultModel?: string;
  /**
   * Client tools one request may offer, counted as the run gets them: in namespaces, additional_tools
   * items and a client's own code mode too. Default DEFAULT_LIMITS.maxClientTools.
   */
  maxClientTools?: number;
};

/** The header that names the hosted tools a request's run left out (the client's note). */
export const DROPPED_TOOLS_HEADER = "codecell-dropped-tools";

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

/** A stored response that is not there: 404 where it is the path's, 400 where a request names it. */
function notFound(id: string, kind: "not_found" | "invalid_request" = "not_found"): AgentError {
  return new AgentError(
    kind,
    `No stored response ${JSON.stringify(id)} of yours: it expired, was deleted, was answered with store: false, or belongs to another token.`,
  );
}

/** One answer in the front's terms: the loop's result, or a passed-through model call's reply. */
type Answer = {
  content: string | null;
  toolCalls: readonly TurnToolCall[];
  finishReason: FinishReason;
  usage: TurnUsage;
  model: string;
};

/**
 * The OpenAI Responses API (`POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`) in front of
 * the agent loop. The request's function tools become client tools (custom tools too, their input one
 * string); a cell's call to one comes back as a `function_call` output item, and the client's
 * `function_call_output` resumes the run. `previous_response_id` continues the stored conversation:
 * its visible messages and the new items are what the loop matches its hidden transcript by, exactly
 * as when a client sends the whole conversation again (with `store: false`).
 */
export class ResponsesFront {
  readonly #options: ResponsesFrontOptions;

  constructor(options: ResponsesFrontOptions) {
    this.#options = options;
  }

  async handle(body: unknown, context: ChatCompletionsContext, sink: ResponseSink): Promise<void> {
    let writer: ResponsesStreamWriter | null = null;
    try {
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        throw invalid("The request body must be a JSON object with model and input (Responses API).");
      }
      const request = body as Record<string, unknown>;
      const ids = new ResponseIds();
      const createdAt = Math.floor(Date.now() / 1000);
      const { loop, upstreamApi, responses } = this.#options;
      const model =
        typeof request.model === "string" && request.model ? request.model : this.#options.defaultModel;
      if (!model) {
        throw invalid(
          'The request names no model: set "model", or agent.upstream.model in the gateway config.',
        );
      }
      if (request.include !== undefined && request.include !== null && !Array.isArray(request.include)) {
        throw invalid('"include" must be an array of strings.');
      }
      if (
        request.metadata !== undefined &&
        request.metadata !== null &&
        typeof request.metadata !== "object"
      ) {
        throw invalid('"metadata" must be an object of string values.');
      }
      const instructions = typeof request.instructions === "string" ? request.instructions : null;
      const previousId = request.previous_response_id;
      let previous: StoredResponse | null = null;
      if (previousId !== undefined && previousId !== null) {
        if (typeof previousId !== "string") throw invalid('"previous_response_id" must be a response id.');
        previous = await responses.get(context.principal, previousId);
        if (!previous) throw notFound(previousId, "invalid_request");
      }
      const tools = fromResponsesTools(request.tools, this.#options.hostedTools ?? "drop", request.input);
      checkClientToolCount(tools.tools.length, {
        maxClientTools: this.#options.maxClientTools ?? DEFAULT_LIMITS.maxClientTools,
      });
      const input = await fromResponsesInput(request.input ?? [], (id) =>
        this.#storedItem(context.principal, id),
      );
      if (input.length === 0 && !previous) throw invalid('"input" holds no items: send the user\'s message.');
      // Instructions lead a new conversation; a follow-up that changes them adds the new ones before its
      // input, so the conversation so far (and its hidden turns) stays the one the model saw.
      const messages: TurnMessage[] = previous ? [...previous.messages] : [];
      if (instructions !== null && instructions !== (previous?.instructions ?? null)) {
        messages.push({ role: "system", content: instructions });
      }
      messages.push(...input);
      const params = responsesParams(request, upstreamApi);
      const passThrough = !loop.codeModeEnabled || tools.tools.length === 0 || request.tool_choice === "none";
      const settings = { id: ids.responseId, createdAt, instructions, model };
      if (request.stream === true) {
        writer = new ResponsesStreamWriter(sink, responseObject(request, settings, null), ids.messageId);
      }
      const stream = writer ? { onTextDelta: (text: string) => writer?.text(text) } : {};
      let answer: Answer;
      const headers: Record<string, string> = {};
      if (tools.dropped.length > 0) headers[DROPPED_TOOLS_HEADER] = tools.dropped.join(", ");
      if (passThrough) {
        const choice = chatToolChoice(request.tool_choice);
        const chosen =
          tools.tools.length === 0
            ? {}
            : upstreamApi === "messages"
              ? chatToolChoiceForMessages(choice, request.parallel_tool_calls)
              : {
                  ...(choice !== undefined ? { tool_choice: choice } : {}),
                  ...(typeof request.parallel_tool_calls === "boolean"
                    ? { parallel_tool_calls: request.parallel_tool_calls }
                    : {}),
                };
        const reply = await completeTraced(
          this.#options.upstream,
          { model, messages, tools: tools.tools, codeModeDirectOnly: null, params: { ...params, ...chosen } },
          { signal: context.signal, ...stream, ...drainedOf(sink) },
        );
        answer = {
          content: reply.content,
          toolCalls: reply.toolCalls,
          finishReason: reply.finishReason,
          usage: reply.usage ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
          model: reply.model || model,
        };
      } else {
        const result = await loop.drive({
          api: "responses",
          // The thread is known before the first model call: its header goes out with the first event.
          onThread: (threadId) => {
            sink.thread?.(threadId);
            writer?.setHeaders({ "codecell-thread": threadId });
          },
          principal: context.principal,
          ...(context.conversation !== undefined ? { conversation: context.conversation } : {}),
          model,
          messages,
          clientTools: tools.tools,
          params,
          signal: context.signal,
          ...stream,
          ...drainedOf(sink),
        });
        headers["codecell-thread"] = result.threadId;
        answer = result;
      }
      const ending = responsesEnding(answer.finishReason);
      const response = responseObject(request, settings, {
        ...answer,
        output: toResponsesOutput(ids, answer.content, answer.toolCalls, tools, ending.status),
      });
      if (request.store !== false) {
        const answered: TurnMessage = {
          role: "assistant",
          content: answer.content,
          ...(answer.toolCalls.length ? { toolCalls: [...answer.toolCalls] } : {}),
        };
        await responses.put(
          context.principal,
          ids.responseId,
          {
            response,
            messages: [...messages, answered],
            instructions: instructions ?? previous?.instructions ?? null,
          },
          this.#options.storeTtlSeconds ?? 3600,
        );
      }
      if (writer) writer.finish(response, headers);
      else sink.json(200, response, headers);
    } catch (error) {
      this.#fail(error, context, sink, writer);
    }
  }

  /** `GET /v1/responses/{id}`: a stored response of the principal's. */
  async retrieve(id: string, context: ChatCompletionsContext, sink: ResponseSink): Promise<void> {
    try {
      const stored = await this.#options.responses.get(context.principal, id);
      if (!stored) throw notFound(id);
      sink.json(200, stored.response);
    } catch (error) {
      this.#fail(error, context, sink);
    }
  }

  /** `DELETE /v1/responses/{id}`: forgets a stored response of the principal's. */
  async remove(id: string, context: ChatCompletionsContext, sink: ResponseSink): Promise<void> {
    try {
      if (!(await this.#options.responses.delete(context.principal, id))) throw notFound(id);
      sink.json(200, { id, object: "response.deleted", deleted: true });
    } catch (error) {
      this.#fail(error, context, sink);
    }
  }

  /** The output item an `item_reference` names, from the stored response it belongs to. */
  async #storedItem(principal: string, itemId: string): Promise<unknown | null> {
    const responseId = responseOfItem(itemId);
    if (!responseId) return null;
    const stored = await this.#options.responses.get(principal, responseId);
    const output = (stored?.response.output ?? []) as Array<{ id?: unknown }>;
    return output.find((item) => item.id === itemId) ?? null;
  }

  #fail(
    error: unknown,
    context: ChatCompletionsContext,
    sink: ResponseSink,
    writer: ResponsesStreamWriter | null = null,
  ): void {
    const failure = AgentError.is(error)
      ? error
      : new AgentError("internal", `Internal error: ${(error as Error)?.message ?? String(error)}`);
    sink.failed?.(failure);
    if (context.signal.aborted) return;
    if (writer?.started) writer.fail(failure);
    else sink.json(failure.status, openAiErrorBody(failure), { ...failure.headers });
  }
}

/**
 * The response object as the API shapes it, the request's settings echoed; without an answer yet, the
 * `in_progress` response a stream starts with.
 */
function responseObject(
  request: Record<string, unknown>,
  settings: { id: string; createdAt: number; instructions: string | null; model: string },
  answer: (Answer & { output: unknown[] }) | null,
): Record<string, unknown> {
  return {
    id: settings.id,
    object: "response",
    created_at: settings.createdAt,
    ...(answer ? responsesEnding(answer.finishReason) : { status: "in_progress", incomplete_details: null }),
    background: false,
    error: null,
    instructions: settings.instructions,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    model: answer?.model || settings.model,
    output: answer?.output ?? [],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: request.store !== false,
    temperature: request.temperature ?? null,
    text: request.text ?? { format: { type: "text" } },
    tool_choice: request.tool_choice ?? "auto",
    tools: request.tools ?? [],
    top_p: request.top_p ?? null,
    truncation: request.truncation ?? "disabled",
    usage: answer ? toResponsesUsage(answer.usage) : null,
    user: request.user ?? null,
  };
}
