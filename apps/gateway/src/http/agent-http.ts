import type { IncomingMessage, ServerResponse } from "node:http";
import {
  AgentError,
  AgentLoop,
  ChatCompletionsFront,
  checkClientTools,
  DEFAULT_LIMITS,
  jsonDepth,
  MessagesFront,
  MessagesUpstream,
  messagesErrorBody,
  modelList,
  OpenAiUpstream,
  openAiErrorBody,
  type RequestLimits,
  type ResponseSink,
  ResponsesFront,
  ResponsesUpstream,
  snapshotStoreConversations,
  snapshotStoreResponses,
} from "@codecell/agent";
import { debugLine, debugSwitches, redact } from "../debug-switches.js";
import type { Gateway } from "../gateway.js";
import { type ApprovalClient, NO_APPROVAL_CLIENT } from "../mcp/approvals.js";
import { AgentRequestRecord, agentRequest, countedUpstream } from "../telemetry/agent-request-telemetry.js";
import type { ServerSpan } from "../telemetry/request-tracing.js";
import type { AuthOutcome } from "./http-auth.js";
import { bearerChallenge } from "./http-auth.js";

/**
 * Nothing can ask an agent endpoint client's user for approval (its API has no such request): calls
 * under tools.approval are refused, with a reason in the endpoint's own terms.
 */
const AGENT_APPROVALS: ApprovalClient = {
  ...NO_APPROVAL_CLIENT,
  cannotAsk:
    "this agent endpoint request has no way to ask its user (its HTTP API has no approval request). Call the tool through an MCP client that supports approvals, or take it out of tools.approval",
};

/** The agent endpoint's paths all start here (the HTTP transport routes the prefix to this module). */
export const AGENT_PATH_PREFIX = "/v1/";
/** OpenAI Chat Completions, code mode in front of the upstream model. */
export const CHAT_COMPLETIONS_PATH = "/v1/chat/completions";
/** The Anthropic Messages API, code mode in front of the same upstream. */
export const MESSAGES_PATH = "/v1/messages";
/** The OpenAI Responses API, code mode in front of the same upstream. */
export const RESPONSES_PATH = "/v1/responses";
/** `GET` and `DELETE /v1/responses/<id>`: a stored response. */
const RESPONSE_PATH = /^\/v1\/responses\/([^/]+)$/;
/** The routes that put code mode in front of the upstream model, by the API each speaks (the banner lists them). */
export const AGENT_ROUTES = [
  { api: "OpenAI Chat Completions", path: CHAT_COMPLETIONS_PATH },
  { api: "Anthropic Messages", path: MESSAGES_PATH },
  { api: "OpenAI Responses", path: RESPONSES_PATH },
] as const;
/** `GET /v1/models`: the upstream's models, or the configured one. */
export const MODELS_PATH = "/v1/models";
/** `GET /v1/codecell/threads/<thread>/trajectory`: a thread's exec and wait calls with their nested calls. */
const TRAJECTORY_PATH = /^\/v1\/codecell\/threads\/([^/]+)\/trajectory$/;

const CONVERSATION_HEADER = "codecell-session";
const MAX_CONVERSATION_LENGTH = 200;

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

function sinkFor(res: ServerResponse): ResponseSink {
  return {
    json: (status, body, headers) => sendJson(res, status, body, headers),
    startStream: (headers) => {
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
        ...headers,
      });
      res.flushHeaders();
    },
    write: (text) => void res.write(text),
    drained: () => drained(res),
    end: () => void res.end(),
  };
}

/**
 * Resolves once the client has taken what was written to it: at once when its buffer is below the
 * high-water mark, else at its next 'drain', or when the response closes (the client went away).
 */
function drained(res: ServerResponse): Promise<void> {
  if (!res.writableNeedDrain || res.destroyed || res.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/**
 * The request body as JSON, within the limits: its bytes (the rest is not read), its nesting (scanned
 * before parsing, so nothing deeper reaches code that recurses) and the number of its tools.
 */
async function readJson(req: IncomingMessage, limits: RequestLimits): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limits.maxBodyBytes) {
      throw new AgentError(
        "invalid_request",
        `The request body is over ${limits.maxBodyBytes} bytes (agent.limits.maxBodyBytes). Send a shorter conversation, or fewer or smaller tools.`,
      );
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (jsonDepth(text, limits.maxJsonDepth) > limits.maxJsonDepth) {
    throw new AgentError(
      "invalid_request",
      `The request body nests arrays and objects more than ${limits.maxJsonDepth} levels deep (agent.limits.maxJsonDepth). Send flatter values.`,
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new AgentError("invalid_request", `The request body is not JSON: ${(error as Error).message}.`);
  }
  checkClientTools(body, limits);
  return body;
}

/** A path segment decoded, or null when its percent-encoding is broken. */
function decodedSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/**
 * `POST /v1/chat/completions` of `codecell serve --http`: the agent loop of `@codecell/agent` over
 * the gateway's engine, store, catalog and executor. Built on the first request, so a gateway whose
 * clients never call it pays nothing for it.
 */
export function createAgentRoutes(
  gateway: Gateway,
): (req: IncomingMessage, res: ServerResponse, auth: AuthOutcome, pathname: string) => Promise<void> {
  type Built = {
    front: ChatCompletionsFront;
    messages: MessagesFront;
    responses: ResponsesFront;
    loop: AgentLoop;
    models: (signal: AbortSignal) => Promise<unknown>;
  };
  let built: Built | null = null;
  let hostTools: {
    version: number;
    tools: ReturnType<Gateway["effectiveTools"]>;
    mcpServers: ReturnType<Gateway["connector"]["describeServers"]>;
  } | null = null;
  const frontFor = (): Built | null => {
    const settings = gateway.config.agent;
    if (!settings) return null;
    if (built) return built;
    const switches = debugSwitches();
    const transport = {
      baseUrl: settings.upstream.baseUrl,
      ...(settings.upstream.apiKey ? { apiKey: settings.upstream.apiKey } : {}),
      headers: settings.upstream.headers,
      timeoutMs: settings.upstream.timeoutMs,
      limits: settings.limits,
      showAddress: settings.upstream.showAddressInErrors,
      debug: {
        payload: switches.payload,
        transport: switches.transport,
        sse: switches.sse,
        line: (tag: string, text: string) => debugLine(tag, text),
        redact,
      },
    };
    const upstream =
      settings.upstream.api === "messages"
        ? new MessagesUpstream({ ...transport, defaultMaxTokens: settings.upstream.maxTokens })
        : settings.upstream.api === "responses"
          ? new ResponsesUpstream({ ...transport, execAsCustomTool: settings.upstream.execAsCustomTool })
          : new OpenAiUpstream(transport);
    // The fronts write parameters and content parts in Chat Completions terms for any OpenAI upstream
    // (a Responses upstream maps them itself).
    const upstreamApi = settings.upstream.api === "messages" ? "messages" : "chat-completions";
    const loop = new AgentLoop({
      engine: gateway.engine,
      // Each model call counted in /metrics (read when the call ends: metrics may be enabled later).
      upstream: countedUpstream(upstream, () => gateway.metrics),
      conversations: snapshotStoreConversations(gateway.store),
      maxModelTurns: settings.maxModelTurns,
      maxCellsPerRequest: settings.limits.maxCellsPerRequest,
      transcriptTtlSeconds: settings.transcriptTtlSeconds,
      hostTools: (_principal, sessionId) => {
        const { allow, deny } = gateway.policy();
        // The effective tools change only when a downstream server's tools do: built once per change,
        // not per request (building them means building a catalog).
        if (!hostTools || hostTools.version !== gateway.toolsVersion) {
          hostTools = {
            version: gateway.toolsVersion,
            tools: gateway.effectiveTools(),
            mcpServers: gateway.connector.describeServers(),
          };
        }
        return {
          tools: hostTools.tools,
          ...(allow ? { allow } : {}),
          deny,
          mcpServers: hostTools.mcpServers,
          // Nothing can ask this client for approvals: calls that need one are refused with a reason.
          executor: gateway.executorFor(sessionId, AGENT_APPROVALS),
          // Plugins' before_tool_call hooks see the model's exec here as they do from an MCP client.
          beforeExec: (input, metadata, run) => gateway.beforeExec(input, metadata, sessionId, run),
        };
      },
    });
    const front = new ChatCompletionsFront({
      loop,
      upstream,
      ...(settings.upstream.model ? { defaultModel: settings.upstream.model } : {}),
    });
    const messages = new MessagesFront({
      loop,
      upstream,
      upstreamApi,
      ...(settings.upstream.model ? { defaultModel: settings.upstream.model } : {}),
    });
    const responses = new ResponsesFront({
      loop,
      upstream,
      upstreamApi,
      responses: snapshotStoreResponses(gateway.store),
      storeTtlSeconds: settings.transcriptTtlSeconds,
      hostedTools: settings.hostedTools,
      maxClientTools: settings.limits.maxClientTools,
      ...(settings.upstream.model ? { defaultModel: settings.upstream.model } : {}),
    });
    const models = (signal: AbortSignal) => modelList(upstream, settings.upstream.model, signal);
    built = { front, messages, responses, loop, models };
    return built;
  };

  return async (req, res, auth, pathname) => {
    // Each API's clients read errors in its own shape: the Messages API's on its path.
    const errorBody: (error: AgentError, status?: number) => unknown =
      pathname === MESSAGES_PATH ? messagesErrorBody : openAiErrorBody;
    if (!auth.ok) {
      const error = new AgentError(
        "invalid_request",
        auth.reason === "missing"
          ? pathname === MESSAGES_PATH
            ? "This gateway needs a token: send it as x-api-key (the Anthropic client's apiKey) or Authorization: Bearer <token>."
            : "This gateway needs a bearer token: send Authorization: Bearer <token> (the openai client's apiKey)."
          : "The bearer token is not valid.",
      );
      sendJson(res, 401, errorBody(error, 401), { "www-authenticate": bearerChallenge(auth.reason) });
      return;
    }
    const trajectory = TRAJECTORY_PATH.exec(pathname);
    const stored = RESPONSE_PATH.exec(pathname);
    const fronts = [CHAT_COMPLETIONS_PATH, MESSAGES_PATH, RESPONSES_PATH, MODELS_PATH];
    if (!fronts.includes(pathname) && !trajectory && !stored) {
      sendJson(
        res,
        404,
        errorBody(
          new AgentError(
            "not_found",
            `Nothing at ${pathname}. The agent endpoint serves POST ${CHAT_COMPLETIONS_PATH}, POST ${MESSAGES_PATH}, POST ${RESPONSES_PATH}, GET and DELETE ${RESPONSES_PATH}/<id>, GET ${MODELS_PATH} and GET /v1/codecell/threads/<thread>/trajectory.`,
          ),
        ),
      );
      return;
    }
    if (trajectory) {
      const agent = frontFor();
      if (req.method !== "GET" || !agent) {
        sendJson(
          res,
          agent ? 405 : 404,
          errorBody(
            new AgentError(
              agent ? "invalid_request" : "not_found",
              "Only GET is served here, with an agent section in the config.",
            ),
            agent ? 405 : 404,
          ),
        );
        return;
      }
      // The principal's own thread only: another principal's id reads as an empty trajectory. Entries
      // are this replica's (the trajectory is kept in the process that ran the calls).
      const threadId = decodedSegment(trajectory[1]!);
      if (threadId === null) {
        sendJson(
          res,
          400,
          errorBody(
            new AgentError(
              "invalid_request",
              "The thread id in the path has broken percent-encoding. Send the codecell-thread header's value, percent-encoded.",
            ),
          ),
        );
        return;
      }
      sendJson(res, 200, agent.loop.trajectory(auth.principal, threadId));
      return;
    }
    if (pathname === MODELS_PATH) {
      const agent = frontFor();
      if (req.method !== "GET" || !agent) {
        const error = new AgentError(
          "invalid_request",
          "Only GET is served here, with an agent section in the config.",
        );
        sendJson(res, agent ? 405 : 404, errorBody(error), agent ? { allow: "GET" } : {});
        return;
      }
      const abort = new AbortController();
      res.once("close", () => abort.abort());
      sendJson(res, 200, await agent.models(abort.signal));
      return;
    }
    if (stored) {
      const id = decodedSegment(stored[1]!);
      if (id === null) {
        const error = new AgentError(
          "invalid_request",
          "The response id in the path has broken percent-encoding. Send the id as the response gave it.",
        );
        sendJson(res, 400, errorBody(error));
        return;
      }
      await storedResponse(req, res, auth, frontFor()?.responses ?? null, id);
      return;
    }
    if (req.method !== "POST") {
      sendJson(
        res,
        405,
        errorBody(new AgentError("invalid_request", `Only POST is served at ${pathname}.`)),
        {
          allow: "POST",
        },
      );
      return;
    }
    const agent = frontFor();
    const chat = !agent
      ? null
      : pathname === MESSAGES_PATH
        ? agent.messages
        : pathname === RESPONSES_PATH
          ? agent.responses
          : agent.front;
    const record = new AgentRequestRecord(
      pathname === MESSAGES_PATH
        ? "messages"
        : pathname === RESPONSES_PATH
          ? "responses"
          : "chat_completions",
      res,
    );
    const limits = gateway.config.agent?.limits ?? DEFAULT_LIMITS;
    const answer = () => answerTurn(req, res, auth, pathname, chat, errorBody, record, limits);
    // Traced, the request is a server span in the client's trace (its traceparent header): the model
    // calls, the hidden cells' exec and wait and their nested calls are spans under it.
    const answered = async (span: ServerSpan | null) => {
      try {
        await answer();
      } finally {
        record.finish(span, gateway.metrics);
      }
    };
    if (gateway.traceRequest) await gateway.traceRequest(agentRequest(req, pathname), answered);
    else await answered(null);
  };
}

/** One POST to a chat path: its checks, then the front's answer on the response. */
async function answerTurn(
  req: IncomingMessage,
  res: ServerResponse,
  auth: Extract<AuthOutcome, { ok: true }>,
  pathname: string,
  chat: ChatCompletionsFront | MessagesFront | ResponsesFront | null,
  errorBody: (error: AgentError, status?: number) => unknown,
  record: AgentRequestRecord,
  limits: RequestLimits,
): Promise<void> {
  if (!chat) {
    sendJson(
      res,
      404,
      errorBody(
        new AgentError(
          "not_found",
          `The agent endpoint is off: the config has no agent section. Add "agent": { "upstream": { "baseUrl": "https://.../v1", "apiKey": "\${OPENAI_API_KEY}" } } to serve ${pathname}.`,
        ),
      ),
    );
    return;
  }
  const header = req.headers[CONVERSATION_HEADER];
  const conversation = (Array.isArray(header) ? header[0] : header)?.trim();
  if (conversation !== undefined && (conversation === "" || conversation.length > MAX_CONVERSATION_LENGTH)) {
    const error = new AgentError(
      "invalid_request",
      `The ${CONVERSATION_HEADER} header must be 1 to ${MAX_CONVERSATION_LENGTH} characters.`,
    );
    record.refused(error);
    sendJson(res, 400, errorBody(error));
    return;
  }
  let body: unknown;
  try {
    body = await readJson(req, limits);
  } catch (error) {
    record.refused(error);
    sendJson(res, 400, errorBody(error as AgentError));
    return;
  }
  record.request(body, conversation);
  // The client going away cancels its request: the upstream call, the cell and its nested calls.
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableEnded) abort.abort(new AgentError("aborted", "The client went away."));
  });
  // A Messages client's betas turn on the fields it sends (context_management, effort, ...): an
  // upstream of that API gets them with the request.
  const beta = pathname === MESSAGES_PATH ? req.headers["anthropic-beta"] : undefined;
  const betas = Array.isArray(beta) ? beta.join(",") : beta;
  await chat.handle(
    body,
    {
      principal: auth.principal,
      ...(conversation !== undefined ? { conversation } : {}),
      ...(betas ? { upstreamHeaders: { "anthropic-beta": betas } } : {}),
      signal: abort.signal,
    },
    record.sink(sinkFor(res)),
  );
}

/** `GET` or `DELETE /v1/responses/<id>`: the principal's stored response. */
async function storedResponse(
  req: IncomingMessage,
  res: ServerResponse,
  auth: Extract<AuthOutcome, { ok: true }>,
  responses: ResponsesFront | null,
  id: string,
): Promise<void> {
  if (!responses || (req.method !== "GET" && req.method !== "DELETE")) {
    const error = new AgentError(
      "invalid_request",
      responses
        ? `Only GET and DELETE are served at ${RESPONSES_PATH}/<id>.`
        : "The agent endpoint is off: the config has no agent section.",
    );
    sendJson(res, responses ? 405 : 404, openAiErrorBody(error), responses ? { allow: "GET, DELETE" } : {});
    return;
  }
  const context = { principal: auth.principal, signal: new AbortController().signal };
  if (req.method === "GET") await responses.retrieve(id, context, sinkFor(res));
  else await responses.remove(id, context, sinkFor(res));
}
