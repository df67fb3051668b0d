import { randomBytes } from "node:crypto";
import { AgentError } from "./agent-error.js";
import { type FinishReason, toWireFinish } from "./finish-reasons.js";
import { contentText, toolFailure } from "./openai-messages.js";
import { namespacedName, type ResponsesTools } from "./responses-tools.js";
import type { TurnMessage, TurnToolCall, TurnUsage } from "./turn.js";

/**
 * The OpenAI Responses API's shapes as the loop reads and writes them: `input` items in the loop's
 * terms, `tools` as client tools, and the loop's answer as `output` items. A `function_call` item is a
 * tool call of an assistant message, a `function_call_output` item a `tool` message; consecutive
 * calls after an assistant message belong to it, so a client that sends back the output it got
 * spells the same conversation the loop stored.
 */

function invalid(message: string): AgentError {
  return new AgentError("invalid_request", message);
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

/** A user, system or developer message's content: text as a string, images as Chat Completions parts. */
function inputContent(content: unknown, where: string, role: string): string | unknown[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    throw invalid(`${where}.content must be a string or an array of input_text and input_image parts.`);
  }
  const parts = content.map((part, index) => {
    const fields = record(part);
    const at = `${where}.content[${index}]`;
    if ((fields.type === "input_text" || fields.type === "output_text") && typeof fields.text === "string") {
      return { type: "text", text: fields.text };
    }
    if (fields.type === "input_image" && role === "user") {
      if (typeof fields.image_url !== "string") {
        throw invalid(
          `${at}: an input_image needs an image_url (a data URL or an http(s) URL); file ids are not served here.`,
        );
      }
      return {
        type: "image_url",
        image_url: {
          url: fields.image_url,
          ...(typeof fields.detail === "string" ? { detail: fields.detail } : {}),
        },
      };
    }
    throw invalid(
      `${at} is a ${JSON.stringify(fields.type)} part; send input_text${role === "user" ? " and input_image" : ""} parts here.`,
    );
  });
  // Text alone reads as a string, so the same words hash the same whichever way the client wrote them.
  return parts.every((part) => part.type === "text")
    ? parts.map((part) => (part as { text: string }).text).join("")
    : parts;
}

/** A tool output's text: a string, or its text parts. */
function outputText(output: unknown, where: string): string {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) return contentText(output.map((part) => ({ ...record(part), type: "text" })));
  throw invalid(`${where}.output must be a string or an array of input_text parts.`);
}

/** Item types of hosted tools' calls and results: no cell ran them, so they have no place in the run. */
const HOSTED_ITEMS =
  /^(web_search|file_search|computer|code_interpreter|image_generation|local_shell|shell|apply_patch|mcp)_/;

/**
 * A request's `input` as the loop's messages. `resolve` finds the item an `item_reference` names (an
 * output item of one of the principal's stored responses), or null.
 */
export async function fromResponsesInput(
  input: unknown,
  resolve: (id: string) => Promise<unknown | null>,
): Promise<TurnMessage[]> {
  if (typeof input === "string") return [{ role: "user", content: input }];
  if (!Array.isArray(input)) {
    throw invalid('"input" must be a string or an array of input items.');
  }
  const messages: TurnMessage[] = [];
  const lastAssistant = (): Extract<TurnMessage, { role: "assistant" }> | null => {
    const last = messages.at(-1);
    return last?.role === "assistant" ? last : null;
  };
  const addCall = (call: TurnToolCall) => {
    const assistant = lastAssistant();
    if (assistant) assistant.toolCalls = [...(assistant.toolCalls ?? []), call];
    else messages.push({ role: "assistant", content: null, toolCalls: [call] });
  };
  for (const [index, raw] of input.entries()) {
    const where = `input[${index}]`;
    let fields = record(raw);
    if (fields.type === "item_reference") {
      const found = typeof fields.id === "string" ? await resolve(fields.id) : null;
      if (!found) {
        throw invalid(
          `${where} references item ${JSON.stringify(fields.id)}, which is not an output item of a stored response of yours (it expired, was deleted, or was answered with store: false). Send the item itself instead.`,
        );
      }
      fields = record(found);
    }
    const type = fields.type ?? (fields.role !== undefined ? "message" : undefined);
    switch (type) {
      case "message": {
        const role = fields.role;
        if (role === "assistant") {
          const text =
            typeof fields.content === "string"
              ? fields.content
              : contentText(
                  (Array.isArray(fields.content) ? fields.content : []).map((part) => {
                    const partFields = record(part);
                    return { type: "text", text: partFields.text ?? partFields.refusal ?? "" };
                  }),
                );
          messages.push({ role: "assistant", content: text || null });
        } else if (role === "user") {
          messages.push({ role: "user", content: inputContent(fields.content, where, "user") });
        } else if (role === "system" || role === "developer") {
          messages.push({ role: "system", content: inputContent(fields.content, where, "system") });
        } else {
          throw invalid(
            `${where} has role ${JSON.stringify(role)}; use user, system, developer or assistant.`,
          );
        }
        break;
      }
      case "function_call":
      case "custom_tool_call": {
        if (typeof fields.call_id !== "string" || typeof fields.name !== "string") {
          throw invalid(`${where}: a ${type} item needs call_id and name.`);
        }
        // A namespace's tool is called by the name the run knows it by (the name it was handed out as).
        const name =
          typeof fields.namespace === "string" && fields.namespace
            ? namespacedName(fields.namespace, fields.name)
            : fields.name;
        const args =
          type === "custom_tool_call"
            ? JSON.stringify({ input: typeof fields.input === "string" ? fields.input : "" })
            : typeof fields.arguments === "string"
              ? fields.arguments
              : JSON.stringify(fields.arguments ?? {});
        addCall({ id: fields.call_id, name, arguments: args });
        break;
      }
      case "function_call_output":
      case "custom_tool_call_output": {
        if (typeof fields.call_id !== "string") throw invalid(`${where}: a ${type} item needs call_id.`);
        const text = outputText(fields.output, where);
        const failure = toolFailure(text);
        messages.push({
          role: "tool",
          toolCallId: fields.call_id,
          content: failure ?? text,
          ...(failure !== null ? { isError: true } : {}),
        });
        break;
      }
      case "additional_tools":
        // Tools the client offers in its input: read with the request's tools (responses-tools.ts).
        break;
      case "reasoning":
        // Reasoning of an earlier answer: these upstreams take none back, and the hidden turns keep
        // what the model saw of its own cells.
        break;
      default:
        if (typeof type === "string" && HOSTED_ITEMS.test(type)) break;
        throw invalid(
          `${where} is a ${JSON.stringify(type)} item; send message, function_call, function_call_output, custom_tool_call, custom_tool_call_output, additional_tools, reasoning or item_reference items.`,
        );
    }
  }
  return messages;
}

/** A response id and the ids of its output items, which name the response they belong to. */
export class ResponseIds {
  readonly hex = randomBytes(12).toString("hex");
  /** The message item's, known before the text is (a stream shows the item as the model writes). */
  readonly messageId = `msg_${this.hex}_0`;
  #next = 1;

  get responseId(): string {
    return `resp_${this.hex}`;
  }

  item(prefix: "fc" | "ctc"): string {
    return `${prefix}_${this.hex}_${this.#next++}`;
  }
}

/** The response an output item id belongs to (null for an id this endpoint did not make). */
export function responseOfItem(itemId: string): string | null {
  const match = /^(?:msg|fc|ctc)_([0-9a-f]{24})_\d+$/.exec(itemId);
  return match ? `resp_${match[1]}` : null;
}

export type ResponsesOutputItem = Record<string, unknown> & { type: string; id: string };

/** A message output item holding the answer's text (none yet while it is `in_progress`). */
export function messageItem(id: string, text: string, status = "completed"): ResponsesOutputItem {
  return {
    type: "message",
    id,
    status,
    role: "assistant",
    content: status === "in_progress" ? [] : [outputTextPart(text)],
  };
}

/**
 * How a response ends, from the loop's reason (the finish-reason table's Responses column): completed,
 * or incomplete with the reason the answer was cut off.
 */
export function responsesEnding(reason: FinishReason): {
  status: "completed" | "incomplete";
  incomplete_details: { reason: string } | null;
} {
  const word = toWireFinish("responses", reason);
  return word === "completed"
    ? { status: "completed", incomplete_details: null }
    : { status: "incomplete", incomplete_details: { reason: word } };
}

export function outputTextPart(text: string): Record<string, unknown> {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

/** A tool call as an output item: a `custom_tool_call` (its input the string) for a custom tool. */
export function callItem(
  ids: ResponseIds,
  call: TurnToolCall,
  tools: Pick<ResponsesTools, "custom" | "namespaced">,
): ResponsesOutputItem {
  // A namespace's tool goes back under its own name, with its namespace.
  const wire = tools.namespaced.get(call.name);
  const named = wire ? { name: wire.name, namespace: wire.namespace } : { name: call.name };
  if (tools.custom.has(call.name)) {
    let input = "";
    try {
      const value = record(JSON.parse(call.arguments)).input;
      input = typeof value === "string" ? value : JSON.stringify(value ?? "");
    } catch {
      input = call.arguments;
    }
    return {
      type: "custom_tool_call",
      id: ids.item("ctc"),
      status: "completed",
      call_id: call.id,
      ...named,
      input,
    };
  }
  return {
    type: "function_call",
    id: ids.item("fc"),
    status: "completed",
    call_id: call.id,
    ...named,
    arguments: call.arguments,
  };
}

/**
 * The answer as output items: a message with its text (when there is any; `incomplete` when the
 * answer was cut off), then one item per call.
 */
export function toResponsesOutput(
  ids: ResponseIds,
  content: string | null,
  toolCalls: readonly TurnToolCall[],
  tools: Pick<ResponsesTools, "custom" | "namespaced">,
  status: "completed" | "incomplete" = "completed",
): ResponsesOutputItem[] {
  return [
    ...(content ? [messageItem(ids.messageId, content, status)] : []),
    ...toolCalls.map((call) => callItem(ids, call, tools)),
  ];
}

export function toResponsesUsage(usage: TurnUsage): Record<string, unknown> {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.totalTokens,
  };
}

/**
 * A Responses `tool_choice` in Chat Completions terms (for a request passed through with the client's
 * own tools); hosted tool choices and `allowed_tools` leave the choice to the model.
 */
export function chatToolChoice(choice: unknown): unknown {
  if (choice === undefined || choice === null) return undefined;
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  const fields = record(choice);
  if ((fields.type === "function" || fields.type === "custom") && typeof fields.name === "string") {
    return { type: "function", function: { name: fields.name } };
  }
  if (typeof fields.type === "string") return "auto";
  throw invalid('"tool_choice" must be "auto", "required", "none" or { type: "function", name }.');
}
