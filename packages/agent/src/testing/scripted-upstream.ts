// A test double for hosts and for this repository: a model server that answers from a script in the
// Chat Completions, the Messages or the Responses API (see startScriptedUpstream). Exported as `@codecell/agent/testing`;
// the loop never imports it.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The one fake of the agent endpoint's tests: a model server on loopback (OpenAI Chat Completions, or
 * the Messages API with `{ api: "messages" }`) that answers from a script and records every body it
 * receives. A step sees the body and says what to answer; `stream: true` requests get the answer as
 * the API's event stream.
 */
export type ScriptedReply =
  | ({ text: string; usage?: { prompt: number; completion: number } } & AnswerOptions)
  | ({
      /** `custom`: a Responses upstream answers a custom_tool_call whose input is `arguments` (a string). */
      toolCalls: Array<{ name: string; arguments: unknown; id?: string; custom?: true }>;
      text?: string;
      /**
       * A Responses upstream answers a reasoning item first, with this as its encrypted content; a
       * Messages upstream a thinking block, with this as its signature.
       */
      reasoning?: string;
      usage?: { prompt: number; completion: number };
    } & AnswerOptions)
  /** An error status with its body, and headers such as a 429's `retry-after`. */
  | { status: number; body: unknown; headers?: Record<string, string> }
  | { raw: string; contentType?: string }
  /** Never answers (for timeouts and aborts); the socket stays open until the client goes. */
  | { hang: true }
  /** Drops the connection without an answer, as a server that died mid-request. */
  | { destroy: true };

/** How an answer ends and comes: the API's own finish (stop) reason, and whole JSON despite `stream: true`. */
export type AnswerOptions = {
  /**
   * The finish_reason (Chat Completions) or stop_reason (Messages) sent, instead of the usual one; for
   * the Responses API, the incomplete_details reason of an incomplete response ("completed": none).
   */
  finish?: string;
  /** Answers one JSON body even when the request asks for a stream, as some servers do. */
  whole?: true;
};

/** A step that returns a promise answers when it settles (a test holds a request in flight that way). */
export type ScriptStep =
  | ScriptedReply
  | ((body: Record<string, unknown>) => ScriptedReply | Promise<ScriptedReply>);

export type ScriptedUpstream = {
  baseUrl: string;
  bodies: Array<Record<string, unknown>>;
  /** The headers of each request, beside its body in `bodies` (a `traceparent`, an `authorization`). */
  headers: IncomingHttpHeaders[];
  /** How many hung requests the client has given up on (their connection closed). */
  abandoned(): number;
  /** How many TCP connections clients have opened (a client that keeps connections alive opens few). */
  connections(): number;
  /** Steps left; every request takes the next one. */
  script(...steps: ScriptStep[]): void;
  close(): Promise<void>;
};

let callNumber = 0;

function completion(reply: Answered, model: string) {
  const usage = reply.usage ?? { prompt: 10, completion: 5 };
  const toolCalls =
    "toolCalls" in reply
      ? reply.toolCalls.map((call) => ({
          id: call.id ?? `up_${++callNumber}`,
          type: "function",
          function: {
            name: call.name,
            arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
          },
        }))
      : [];
  return {
    message: {
      role: "assistant",
      content: reply.text ?? null,
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
    },
    finish_reason: reply.finish ?? (toolCalls.length ? "tool_calls" : "stop"),
    usage: {
      prompt_tokens: usage.prompt,
      completion_tokens: usage.completion,
      total_tokens: usage.prompt + usage.completion,
    },
    model,
  };
}

/** Which API the scripted server speaks: Chat Completions (the default) or the Messages API. */
export type ScriptedUpstreamOptions = {
  api?: "chat-completions" | "messages" | "responses";
  /** Served as `GET /models` in the API's shape; without it that path is a 404, as on many servers. */
  models?: string[];
};

type Answered = Exclude<
  ScriptedReply,
  { status: number } | { raw: string } | { hang: true } | { destroy: true }
>;

/** A scripted reply as a Messages API answer: its content blocks, stop reason and usage. */
function message(reply: Answered, model: string, id: string) {
  const usage = reply.usage ?? { prompt: 10, completion: 5 };
  const calls = "toolCalls" in reply ? reply.toolCalls : [];
  const signature = "reasoning" in reply ? reply.reasoning : undefined;
  const content = [
    ...(signature ? [{ type: "thinking", thinking: `Thinking before ${id}.`, signature }] : []),
    ...(reply.text ? [{ type: "text", text: reply.text }] : []),
    ...calls.map((call) => ({
      type: "tool_use",
      id: call.id ?? `toolu_up_${++callNumber}`,
      name: call.name,
      input: typeof call.arguments === "string" ? JSON.parse(call.arguments) : call.arguments,
    })),
  ];
  return {
    id,
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: reply.finish ?? (calls.length ? "tool_use" : "end_turn"),
    stop_sequence: null,
    usage: { input_tokens: usage.prompt, output_tokens: usage.completion },
  };
}

/** A Messages answer as its event stream, the way the API sends it (text in small deltas, input JSON in two). */
function writeMessageStream(
  res: import("node:http").ServerResponse,
  answer: ReturnType<typeof message>,
): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  send("message_start", {
    message: {
      ...answer,
      content: [],
      stop_reason: null,
      usage: { input_tokens: answer.usage.input_tokens, output_tokens: 1 },
    },
  });
  send("ping", {});
  answer.content.forEach((block, index) => {
    if (block.type === "text") {
      send("content_block_start", { index, content_block: { type: "text", text: "" } });
      const text = (block as { text: string }).text;
      for (let at = 0; at < text.length; at += 4) {
        send("content_block_delta", { index, delta: { type: "text_delta", text: text.slice(at, at + 4) } });
      }
    } else if (block.type === "thinking") {
      const { thinking, signature } = block as { thinking: string; signature: string };
      send("content_block_start", {
        index,
        content_block: { type: "thinking", thinking: "", signature: "" },
      });
      send("content_block_delta", { index, delta: { type: "thinking_delta", thinking } });
      send("content_block_delta", { index, delta: { type: "signature_delta", signature } });
    } else {
      const call = block as { id: string; name: string; input: unknown };
      send("content_block_start", {
        index,
        content_block: { type: "tool_use", id: call.id, name: call.name, input: {} },
      });
      const json = JSON.stringify(call.input);
      const half = Math.floor(json.length / 2);
      send("content_block_delta", {
        index,
        delta: { type: "input_json_delta", partial_json: json.slice(0, half) },
      });
      send("content_block_delta", {
        index,
        delta: { type: "input_json_delta", partial_json: json.slice(half) },
      });
    }
    send("content_block_stop", { index });
  });
  send("message_delta", {
    delta: { stop_reason: answer.stop_reason, stop_sequence: null },
    usage: { output_tokens: answer.usage.output_tokens },
  });
  send("message_stop", {});
  res.end();
}

/** A scripted reply as a Responses API response object: a message item, then function_call items. */
function responseAnswer(reply: Answered, model: string, id: string) {
  const usage = reply.usage ?? { prompt: 10, completion: 5 };
  const calls = "toolCalls" in reply ? reply.toolCalls : [];
  const reasoning = "reasoning" in reply ? reply.reasoning : undefined;
  const output: Array<Record<string, unknown>> = [
    ...(reasoning ? [{ type: "reasoning", id: `rs_${id}`, summary: [], encrypted_content: reasoning }] : []),
    ...(reply.text
      ? [
          {
            type: "message",
            id: `msg_${id}`,
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: reply.text, annotations: [] }],
          },
        ]
      : []),
    ...calls.map((call, index) =>
      call.custom
        ? {
            type: "custom_tool_call",
            id: `ctc_${id}_${index}`,
            status: "completed",
            call_id: call.id ?? `call_up_${++callNumber}`,
            name: call.name,
            input: String(call.arguments),
          }
        : {
            type: "function_call",
            id: `fc_${id}_${index}`,
            status: "completed",
            call_id: call.id ?? `call_up_${++callNumber}`,
            name: call.name,
            arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
          },
    ),
  ];
  // A finish word other than "completed" is why the response is incomplete (its incomplete_details).
  const incomplete = reply.finish !== undefined && reply.finish !== "completed";
  return {
    id,
    object: "response",
    created_at: 1,
    status: incomplete ? "incomplete" : "completed",
    incomplete_details: incomplete ? { reason: reply.finish } : null,
    model,
    output,
    usage: {
      input_tokens: usage.prompt,
      output_tokens: usage.completion,
      total_tokens: usage.prompt + usage.completion,
    },
  };
}

/** A response as the Responses event stream: text in small deltas, each call's arguments in two. */
function writeResponseStream(
  res: import("node:http").ServerResponse,
  answer: ReturnType<typeof responseAnswer>,
): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  let sequence = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data, sequence_number: sequence++ })}\n\n`);
  send("response.created", { response: { ...answer, status: "in_progress", output: [] } });
  answer.output.forEach((item, index) => {
    if (item.type === "reasoning") {
      send("response.output_item.added", { output_index: index, item });
    } else if (item.type === "message") {
      const text = (item.content as Array<{ text: string }>)[0]!.text;
      send("response.output_item.added", { output_index: index, item: { ...item, content: [] } });
      for (let at = 0; at < text.length; at += 4) {
        send("response.output_text.delta", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          delta: text.slice(at, at + 4),
        });
      }
    } else if (item.type === "custom_tool_call") {
      send("response.output_item.added", { output_index: index, item: { ...item, input: "" } });
      send("response.custom_tool_call_input.delta", {
        item_id: item.id,
        output_index: index,
        delta: item.input,
      });
    } else {
      const args = String(item.arguments);
      const half = Math.floor(args.length / 2);
      send("response.output_item.added", { output_index: index, item: { ...item, arguments: "" } });
      send("response.function_call_arguments.delta", {
        item_id: item.id,
        output_index: index,
        delta: args.slice(0, half),
      });
      send("response.function_call_arguments.delta", {
        item_id: item.id,
        output_index: index,
        delta: args.slice(half),
      });
    }
    send("response.output_item.done", { output_index: index, item });
  });
  send(answer.status === "incomplete" ? "response.incomplete" : "response.completed", { response: answer });
  res.end();
}

export async function startScriptedUpstream(
  options: ScriptedUpstreamOptions = {},
): Promise<ScriptedUpstream> {
  const api = options.api ?? "chat-completions";
  const steps: ScriptStep[] = [];
  const bodies: Array<Record<string, unknown>> = [];
  const headers: IncomingHttpHeaders[] = [];
  const hung: import("node:http").ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    if (req.method === "GET") {
      const found = req.url === "/v1/models" && options.models;
      const data = (options.models ?? []).map((id) =>
        api === "messages"
          ? { type: "model", id, display_name: id.toUpperCase(), created_at: "2026-01-02T00:00:00Z" }
          : { id, object: "model", created: 1_700_000_000, owned_by: "scripted" },
      );
      res
        .writeHead(found ? 200 : 404, { "content-type": "application/json" })
        .end(JSON.stringify(found ? { object: "list", data } : { error: { message: "no such path" } }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400).end("not json");
        return;
      }
      bodies.push(body);
      headers.push(req.headers);
      const step = steps.shift();
      if (!step) {
        res
          .writeHead(500, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { message: "script exhausted" } }));
        return;
      }
      const reply = typeof step === "function" ? await step(body) : step;
      if ("hang" in reply) {
        hung.push(res);
        return;
      }
      if ("destroy" in reply) {
        res.socket?.destroy();
        return;
      }
      if ("status" in reply) {
        res
          .writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
          .end(JSON.stringify(reply.body));
        return;
      }
      if ("raw" in reply) {
        res.writeHead(200, { "content-type": reply.contentType ?? "application/json" }).end(reply.raw);
        return;
      }
      const model = typeof body.model === "string" ? body.model : "scripted";
      if (api === "responses") {
        const answer = responseAnswer(reply, model, `resp_up_${bodies.length}`);
        if (body.stream === true && !reply.whole) writeResponseStream(res, answer);
        else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
        return;
      }
      if (api === "messages") {
        const answer = message(reply, model, `msg_up_${bodies.length}`);
        if (body.stream === true && !reply.whole) writeMessageStream(res, answer);
        else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
        return;
      }
      const answer = completion(reply, model);
      const id = `up-${bodies.length}`;
      if (body.stream !== true || reply.whole) {
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            id,
            object: "chat.completion",
            created: 1,
            model,
            choices: [
              { index: 0, message: answer.message, finish_reason: answer.finish_reason, logprobs: null },
            ],
            usage: answer.usage,
          }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const send = (delta: Record<string, unknown>, finish: string | null) =>
        res.write(
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
        );
      send({ role: "assistant", content: "" }, null);
      const text = answer.message.content ?? "";
      // The text in pieces of a few characters, as a model streams it.
      for (let at = 0; at < text.length; at += 4) send({ content: text.slice(at, at + 4) }, null);
      const calls = (answer.message as { tool_calls?: Array<Record<string, unknown>> }).tool_calls ?? [];
      calls.forEach((call, index) => {
        const fn = call.function as { name: string; arguments: string };
        const half = Math.floor(fn.arguments.length / 2);
        send(
          {
            tool_calls: [
              {
                index,
                id: call.id,
                type: "function",
                function: { name: fn.name, arguments: fn.arguments.slice(0, half) },
              },
            ],
          },
          null,
        );
        send({ tool_calls: [{ index, function: { arguments: fn.arguments.slice(half) } }] }, null);
      });
      send({}, answer.finish_reason);
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [], usage: answer.usage })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
    });
  });
  let connections = 0;
  server.on("connection", () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    bodies,
    headers,
    connections: () => connections,
    abandoned: () =>
      hung.filter((res) => res.destroyed || res.socket === null || res.socket.destroyed).length,
    script: (...more) => {
      steps.splice(0, steps.length, ...more);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
